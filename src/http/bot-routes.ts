import Router from '@koa/router';
import type { Context } from 'koa';
import onFinished from 'on-finished';
import { BadRequest, Forbidden, messages } from '../errors.js';
import type { Heartbeats } from '../health/heartbeats.js';
import type { BotLifecycle } from '../lifecycle/bot-lifecycle.js';
import type { RateLimiter } from '../lifecycle/rate-limiter.js';
import type { LogWindow, PowerOutcome, RuntimeDriver } from '../runtime/driver.js';
import { askerOf } from './audit.js';
import type { Audit } from './audit.js';
import type { Access } from './access.js';
import { isSelf } from './caller.js';
import type { Caller } from './caller.js';
import type { LogFollowing } from './log-follow.js';
import type { LogReads } from './log-reads.js';
import { logReadCost } from './read-limiter.js';
import { botIdInPath, DEFAULT_LOG_LINES, heartbeatRequest, logsBody, logsQuery, logWindowOf, ownerRequest, selfRestartHeader, validate, validateQuery } from './schemas.js';
import { statsView } from './stats-view.js';

/** One of the lifecycle operations a route offers: what it does (its answer's message), and what a bot asking it of itself gets. */
interface LifecycleOperation {
  readonly name: 'restart' | 'stop' | 'start';
  readonly act: (botId: string) => Promise<string>;
  /** Answered before it runs when a bot asks it of itself; absent: answered after, as anyone is. */
  readonly onItself?: { readonly act: (botId: string) => Promise<unknown>; readonly message: (botId: string) => string };
}

export interface BotRoutesDeps {
  readonly driver: RuntimeDriver;
  readonly lifecycle: BotLifecycle;
  readonly limiter: RateLimiter;
  readonly heartbeats: Heartbeats;
  readonly access: Access;
  readonly audit: Audit;
  readonly logFollowing: LogFollowing;
  readonly logReads: LogReads;
}

/**
 * The six bot endpoints. Each validates its input first (a 400 costs no
 * runtime call), then identifies the caller, then acts.
 */
export function botRoutes({ driver, lifecycle, limiter, heartbeats, access, audit, logFollowing, logReads }: BotRoutesDeps): Router {
  const router = new Router({ prefix: '/api/bots' });
  const { callerFor, readerFor } = access;

  /** The bot's last `lines` log lines, within the bound on reads at once; none costs no runtime call. */
  async function logsOf(ctx: Context, caller: Caller, botId: string, lines: number, window: LogWindow): Promise<string> {
    if (lines === 0) return '';
    await logReads.enter(ctx, botId, caller.kind === 'bot');
    return driver.logs(botId, lines, window);
  }

  /** Throws NotFound for no such bot, Forbidden when `userId` does not own it. */
  async function checkOwner(botId: string, userId: string): Promise<void> {
    const bot = await driver.findBot(botId);
    if (bot.ownerId !== userId) throw new Forbidden(messages.notOwner(botId));
  }

  /**
   * A bot acting on itself would be stopped before it heard back: it is
   * answered first, and the operation runs once the answer has gone out.
   * Its outcome goes to the audit log.
   */
  function afterAnswer(ctx: Context, operation: string, botId: string, act: () => Promise<unknown>): void {
    const asker = askerOf(ctx);
    onFinished(ctx.res, () => {
      audit(asker, operation, botId, act, true).catch(() => undefined);
    });
  }

  /**
   * A restart, stop or start once its caller is known: counted against the rate limit, then done and audited. A bot
   * restarting or stopping itself would not hear back: it is answered first, and the operation runs after.
   */
  async function perform(ctx: Context, caller: Caller, botId: string, operation: LifecycleOperation): Promise<void> {
    await limiter.take(botId, caller.kind);
    if (operation.onItself && isSelf(caller, botId)) {
      const { act, message } = operation.onItself;
      afterAnswer(ctx, operation.name, botId, () => act(botId));
      ctx.body = { ok: true, message: message(botId) };
      return;
    }
    ctx.body = { ok: true, message: await audit(askerOf(ctx), operation.name, botId, () => operation.act(botId)) };
  }

  const done = (outcome: PowerOutcome, botId: string, did: string, was: string): string => `Bot ${botId} ${outcome === 'done' ? did : was}`;
  const restart: LifecycleOperation = {
    name: 'restart',
    act: async (botId) => {
      await lifecycle.restart(botId);
      return `Bot ${botId} restarted`;
    },
    onItself: { act: (botId) => lifecycle.restartInFull(botId), message: (botId) => `Bot ${botId} is restarting` },
  };
  const stop: LifecycleOperation = {
    name: 'stop',
    act: async (botId) => done(await lifecycle.stop(botId), botId, 'stopped', 'was already stopped'),
    onItself: { act: (botId) => lifecycle.stop(botId), message: (botId) => `Bot ${botId} is stopping` },
  };
  const start: LifecycleOperation = {
    name: 'start',
    act: async (botId) => done(await lifecycle.start(botId), botId, 'started', 'was already running'),
  };

  router.post('/self/restart', async (ctx) => {
    const named = validate(selfRestartHeader, ctx.get('x-bot-id') || undefined);
    const caller = await callerFor(ctx, named);
    const botId = named ?? (caller.kind === 'bot' ? caller.botId : undefined);
    if (botId === undefined) throw new BadRequest(messages.noSelfId);
    ctx.state.botId = botId;
    await perform(ctx, caller, botId, restart);
  });

  // A bot's own word that it is well (docs/api.md §13): one entry in memory, no runtime call, no database write.
  router.post('/self/heartbeat', async (ctx) => {
    const { ttl_s } = validate(heartbeatRequest, ctx.request.body ?? {});
    const named = validate(selfRestartHeader, ctx.get('x-bot-id') || undefined);
    const botId = await access.botItself(ctx, named, messages.heartbeatBotOnly);
    heartbeats.beat(botId, ttl_s === undefined ? null : ttl_s * 1000);
    ctx.body = { ok: true, message: `Heartbeat of bot ${botId} taken` };
  });

  // The owner's form of each: the bot named in the body, and the user_id that owns it.
  for (const operation of [restart, stop, start]) {
    router.post(`/${operation.name}`, async (ctx) => {
      const { bot_id, user_id } = validate(ownerRequest, ctx.request.body);
      const caller = await callerFor(ctx, bot_id);
      await checkOwner(bot_id, user_id);
      await perform(ctx, caller, bot_id, operation);
    });
  }

  router.post('/logs', async (ctx) => {
    const { bot_id, lines = DEFAULT_LOG_LINES, since, until } = logsBody(ctx.request.body);
    const window = logWindowOf({ since, until });
    const caller = await readerFor(ctx, bot_id, logReadCost(lines));
    ctx.body = { ok: true, logs: await logsOf(ctx, caller, bot_id, lines, window) };
  });

  router.get('/:bot_id/logs', async (ctx) => {
    const botId = botIdInPath(ctx.params.bot_id);
    const { lines = DEFAULT_LOG_LINES, follow, since, until } = validateQuery(logsQuery, ctx.query);
    const window = logWindowOf({ since, until, follow });
    const caller = await readerFor(ctx, botId, logReadCost(lines));
    if (follow === 'true') {
      await logFollowing.follow(ctx, botId, lines, caller.kind === 'bot');
      return;
    }
    ctx.body = { ok: true, logs: await logsOf(ctx, caller, botId, lines, window) };
  });

  router.get('/:bot_id/stats', async (ctx) => {
    const botId = botIdInPath(ctx.params.bot_id);
    await readerFor(ctx, botId);
    ctx.body = { ok: true, stats: statsView(await driver.stats(botId), new Date()) };
  });

  return router;
}
