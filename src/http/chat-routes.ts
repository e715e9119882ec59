import Router from '@koa/router';
import type { BotChatBase, ChatConfig } from '../config.js';
import { BadRequest, ChatUnreachable, messages, NoChat } from '../errors.js';
import type { BotHistory } from '../history/bot-history.js';
import { botChatConfig, chatKinds, hasChats } from '../notify/bot-chats.js';
import type { BotChats } from '../notify/bot-chats.js';
import { testChats } from '../notify/chat-targets.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import type { Access } from './access.js';
import { carriesBody } from './json-body.js';
import { botChatsRequest, botIdInPath, validate } from './schemas.js';

export interface ChatRoutesDeps {
  readonly driver: RuntimeDriver;
  readonly history: BotHistory;
  readonly access: Access;
  /** The agent's own chats (AGENT_NOTIFY_*); undefined: none. */
  readonly chats: ChatConfig | undefined;
  readonly botChatBase: BotChatBase;
}

/** The chats: a test message to the agent's, and each bot's own, set, read and tested by the platform (docs/api.md §16). */
export function chatRoutes({ driver, history, access, chats, botChatBase }: ChatRoutesDeps): Router {
  const router = new Router();

  router.post('/api/admin/notifications/test', async (ctx) => {
    await access.platformFor(ctx, messages.platformOnlyNotifications);
    if (!chats) throw new NoChat('no chat is configured: set AGENT_NOTIFY_DISCORD_URL, AGENT_NOTIFY_SLACK_URL, AGENT_NOTIFY_TELEGRAM_TOKEN or AGENT_NOTIFY_NTFY_URL (docs/api.md §16)');
    ctx.body = await tested(chats);
  });

  /** The bot's own chats as the store keeps them; `{}` when it has none. */
  async function ownChats(botId: string): Promise<BotChats> {
    const stored = await history.botChats(botId);
    return stored === undefined ? {} : (JSON.parse(stored) as BotChats);
  }

  /** What may be answered of a bot's chats: which there are and the events told, never a URL or token. */
  const shown = (own: BotChats) => ({ targets: chatKinds(own), events: own.events ?? botChatBase.events });

  router.get('/api/admin/bots/:bot_id/chats', async (ctx) => {
    const botId = botIdInPath(ctx.params.bot_id);
    await access.platformFor(ctx, messages.platformOnlyChats);
    ctx.state.botId = botId;
    await driver.findBot(botId);
    ctx.body = { ok: true, chats: shown(await ownChats(botId)) };
  });

  router.put('/api/admin/bots/:bot_id/chats', async (ctx) => {
    const botId = botIdInPath(ctx.params.bot_id);
    // No body is no chats named: never taken for `{}`, which drops them.
    if (!carriesBody(ctx)) throw new BadRequest("a body is required: the bot's chats, or {} to drop them");
    const body = validate(botChatsRequest, ctx.request.body);
    await access.platformFor(ctx, messages.platformOnlyChats);
    ctx.state.botId = botId;
    await driver.findBot(botId);
    // Refuses a host AGENT_NOTIFY_BOT_HOSTS does not allow (422) before anything is kept.
    botChatConfig(body, botChatBase);
    await history.setBotChats(botId, hasChats(body) ? JSON.stringify(body) : undefined);
    const now = shown(hasChats(body) ? body : {});
    ctx.body = {
      ok: true,
      message: now.targets.length > 0 ? `Bot ${botId} is told in ${now.targets.join(', ')} of its own` : `Bot ${botId} has no chat of its own`,
      chats: now,
    };
  });

  router.post('/api/admin/bots/:bot_id/chats/test', async (ctx) => {
    const botId = botIdInPath(ctx.params.bot_id);
    await access.platformFor(ctx, messages.platformOnlyChats);
    ctx.state.botId = botId;
    await driver.findBot(botId);
    const own = await ownChats(botId);
    if (!hasChats(own)) throw new NoChat(`bot ${botId} has no chat of its own: PUT /api/admin/bots/${botId}/chats sets them (docs/api.md §16)`);
    ctx.body = await tested(botChatConfig(own, botChatBase), botId);
  });

  return router;
}

/** A test message to each of `config`'s chats: the answer once all took it, ChatUnreachable naming those that did not. */
async function tested(config: ChatConfig, botId?: string): Promise<{ ok: true; message: string; targets: string[] }> {
  const results = await testChats(config, botId);
  const failed = results.filter((result) => !result.ok);
  if (failed.length > 0) throw new ChatUnreachable(`the test message did not reach every chat: ${failed.map((result) => `${result.target} ${result.error ?? ''}`.trim()).join('; ')}`);
  return { ok: true, message: `a test message reached ${results.map((result) => result.target).join(', ')}`, targets: results.map((result) => result.target) };
}
