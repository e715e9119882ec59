import type { BotChatBase, ChatConfig } from '../config.js';
import { Unprocessable } from '../errors.js';
import { isLoopback } from '../loopback.js';
import type { DeliveryTarget } from '../history/webhook.js';
import { chatTargets } from './chat-targets.js';

/**
 * A bot's own chats (docs/api.md §16), as the platform sets them and the store keeps them: told beside the
 * agent's (AGENT_NOTIFY_*), each with its own delivery record.
 */
export interface BotChats {
  readonly discord_url?: string | undefined;
  readonly slack_url?: string | undefined;
  readonly telegram?: { readonly token: string; readonly chat_id: string } | undefined;
  readonly ntfy?: { readonly url: string; readonly token?: string | undefined } | undefined;
  readonly events?: readonly string[] | undefined;
}

/** A delivery's name for a bot's own chat: `bot-discord` beside the agent's `discord`. */
export const BOT_CHAT_PREFIX = 'bot-';

/** The kinds of chat the bot's own name, as answers and logs name them (never a URL or token). */
export function chatKinds(chats: BotChats): string[] {
  return [
    chats.discord_url === undefined ? [] : ['discord'],
    chats.slack_url === undefined ? [] : ['slack'],
    chats.telegram === undefined ? [] : ['telegram'],
    chats.ntfy === undefined ? [] : ['ntfy'],
  ].flat();
}

/** Whether the bot's chats name any chat at all (`{}` drops them). */
export function hasChats(chats: BotChats): boolean {
  return chatKinds(chats).length > 0;
}

/**
 * The bot's chats as the chat senders take them. A URL must be https on one of AGENT_NOTIFY_BOT_HOSTS (plain
 * http on loopback alone): an owner's chat URL reaches no other host through the agent (422 otherwise).
 */
export function botChatConfig(chats: BotChats, base: BotChatBase): ChatConfig {
  for (const [field, url] of [
    ['discord_url', chats.discord_url],
    ['slack_url', chats.slack_url],
    ['ntfy.url', chats.ntfy?.url],
  ] as const) {
    if (url !== undefined) allowedUrl(field, url, base.hosts);
  }
  if (chats.ntfy && !/^\/[\w-]{1,64}\/?$/.test(new URL(chats.ntfy.url).pathname)) {
    throw new Unprocessable('ntfy.url must name a topic, e.g. https://ntfy.sh/my-bot');
  }
  return {
    discordUrl: chats.discord_url,
    slackUrl: chats.slack_url,
    telegram: chats.telegram && { api: base.telegramApi, token: chats.telegram.token, chatId: chats.telegram.chat_id },
    ntfy: chats.ntfy && { url: chats.ntfy.url, token: chats.ntfy.token },
    events: chats.events ?? base.events,
    consoleUrl: base.consoleUrl,
  };
}

function allowedUrl(field: string, text: string, hosts: readonly string[]): void {
  const url = URL.parse(text);
  if (url === null) throw new Unprocessable(`${field} cannot be read as a URL`);
  const loopback = isLoopback(url.hostname.replace(/^\[|\]$/g, '')) || url.hostname === 'localhost';
  // `host` carries the port only where it is not the scheme's: an entry without one allows that port alone.
  if (!hosts.includes(url.host.toLowerCase())) {
    throw new Unprocessable(`${field} names host ${url.host}, which is not one of AGENT_NOTIFY_BOT_HOSTS (${hosts.join(', ') || 'none'})`);
  }
  if (url.protocol !== 'https:' && !loopback) throw new Unprocessable(`${field} must be an https:// URL (plain http only on loopback)`);
}

/**
 * A bot's own chats as delivery targets, from what the store keeps (JSON); none when it keeps none, or when
 * they name a host AGENT_NOTIFY_BOT_HOSTS no longer allows (`report` says so).
 */
export function botChatTargets(stored: string | undefined, base: BotChatBase, report: (what: string, err: unknown) => void): DeliveryTarget[] {
  if (stored === undefined) return [];
  try {
    return chatTargets(botChatConfig(JSON.parse(stored) as BotChats, base), BOT_CHAT_PREFIX);
  } catch (err) {
    report("a bot's own chats are not told: they name what the agent no longer allows", err);
    return [];
  }
}
