import Router from '@koa/router';
import type { Context } from 'koa';
import onFinished from 'on-finished';
import { BadRequest, Forbidden, messages } from '../errors.js';
import type { BotLifecycle } from '../lifecycle/bot-lifecycle.js';
import type { RateLimiter } from '../lifecycle/rate-limiter.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import { askerOf } from './audit.js';
import type { Audit } from './audit.js';
import type { Access } from './access.js';
import { isSelf } from './caller.js';
import type { Caller } from './caller.js';
import type { LogFollowing } from './log-follow.js';
import type { LogReads } from './log-reads.js';
import { logReadCost } from './read-limiter.js';
import { botIdInPath, DEFAULT_LOG_LINES, logsBody, logsQuery, ownerRequest, selfRestartHeader, validate, validateQuery } from './schemas.js';
import { statsView } from './stats-view.js';

export interface BotRoutesDeps {
  readonly driver: RuntimeDriver;
  readonly lifecycle: BotLifecycle;
  readonly limiter: RateLimiter;
  readonly access: Access;
  readonly audit: Audit;
  readonly logFollowing: LogFollowing;
  readonly logReads: LogReads;
}

/**
 * The six bot endpoints. Each validates its input first (a 400 costs no
 * runtime call), then identifies the caller, then acts.
 */
export function botRoutes({ driver, lifecycle, limiter, access, audit, logFollowing, logReads }: BotRoutesDeps): Router {
  const router = new Router({ prefix: '/api/bots' });
  const { callerFor, readerFor } = access;

  /** The bot's last `lines` log lines, within the bound on reads at once; none costs no runtime call. */
  async function logsOf(ctx: Context, caller: Caller, botId: string, lines: number): Promise<string> {
    if (lines === 0) return '';
    await logReads.enter(ctx, botId, caller.kind === 'bot');
    return driver.logs(botId, lines);
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

  async function restartBot(ctx: Context, caller: Caller, botId: string): Promise<void> {
    await limiter.take(botId, caller.kind);
    if (isSelf(caller, botId)) {
      afterAnswer(ctx, 'restart', botId, () => lifecycle.restartInFull(botId));
      ctx.body = { ok: true, message: `Bot ${botId} is restarting` };
      return;
    }
    await audit(askerOf(ctx), 'restart', botId, () => lifecycle.restart(botId));
    ctx.body = { ok: true, message: `Bot ${botId} restarted` };
  }

  router.post('/self/restart', async (ctx) => {
    const named = validate(selfRestartHeader, ctx.get('x-bot-id') || undefined);
    const caller = await callerFor(ctx, named);
    const botId = named ?? (caller.kind === 'bot' ? caller.botId : undefined);
    if (botId === undefined) throw new BadRequest(messages.noSelfId);
    ctx.state.botId = botId;
    await restartBot(ctx, caller, botId);
  });

  router.post('/restart', async (ctx) => {
    const { bot_id, user_id } = validate(ownerRequest, ctx.request.body);
    const caller = await callerFor(ctx, bot_id);
    await checkOwner(bot_id, user_id);
    await restartBot(ctx, caller, bot_id);
  });

  router.post('/stop', async (ctx) => {
    const { bot_id, user_id } = validate(ownerRequest, ctx.request.body);
    const caller = await callerFor(ctx, bot_id);
    await checkOwner(bot_id, user_id);
    await limiter.take(bot_id, caller.kind);
    if (isSelf(caller, bot_id)) {
      afterAnswer(ctx, 'stop', bot_id, () => lifecycle.stop(bot_id));
      ctx.body = { ok: true, message: `Bot ${bot_id} is stopping` };
      return;
    }
    const outcome = await audit(askerOf(ctx), 'stop', bot_id, () => lifecycle.stop(bot_id));
    ctx.body = { ok: true, message: outcome === 'done' ? `Bot ${bot_id} stopped` : `Bot ${bot_id} was already stopped` };
  });

  router.post('/start', async (ctx) => {
    const { bot_id, user_id } = validate(ownerRequest, ctx.request.body);
    const caller = await callerFor(ctx, bot_id);
    await checkOwner(bot_id, user_id);
    await limiter.take(bot_id, caller.kind);
    const outcome = await audit(askerOf(ctx), 'start', bot_id, () => lifecycle.start(bot_id));
    ctx.body = { ok: true, message: outcome === 'done' ? `Bot ${bot_id} started` : `Bot ${bot_id} was already running` };
  });

  router.post('/logs', async (ctx) => {
    const { bot_id, lines = DEFAULT_LOG_LINES } = logsBody(ctx.request.body);
    const caller = await readerFor(ctx, bot_id, logReadCost(lines));
    ctx.body = { ok: true, logs: await logsOf(ctx, caller, bot_id, lines) };
  });

  router.get('/:bot_id/logs', async (ctx) => {
    const botId = botIdInPath(ctx.params.bot_id);
    const { lines = DEFAULT_LOG_LINES, follow } = validateQuery(logsQuery, ctx.query);
    const caller = await readerFor(ctx, botId, logReadCost(lines));
    if (follow === 'true') {
      await logFollowing.follow(ctx, botId, lines, caller.kind === 'bot');
      return;
    }
    ctx.body = { ok: true, logs: await logsOf(ctx, caller, botId, lines) };
  });

  router.get('/:bot_id/stats', async (ctx) => {
    const botId = botIdInPath(ctx.params.bot_id);
    await readerFor(ctx, botId);
    ctx.body = { ok: true, stats: statsView(await driver.stats(botId), new Date()) };
  });

  return router;
}
