import type { Context } from 'koa';
import { Forbidden, messages, TooManyRequests } from '../errors.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import { authorize, callerOf, plainAddress } from './caller.js';
import { namedConnection, platformConnection } from './connection-limits.js';
import type { Caller, PlatformPolicy } from './caller.js';
import type { ReadLimiter } from './read-limiter.js';

/** Who may call what (docs/api.md §4), as the routes ask it. */
export interface Access {
  /** The caller, who must be `botId` itself or the platform (when a bot is named). */
  callerFor(ctx: Context, botId: string | undefined): Promise<Caller>;
  /** The caller of a read of `botId`; a bot's own reads count against its read rate, as `cost` reads. */
  readerFor(ctx: Context, botId: string, cost?: number): Promise<Caller>;
  /** The bot calling about itself (its heartbeat): `named` must be it; the platform is refused, saying `refusal`. Counts as one read. */
  botItself(ctx: Context, named: string | undefined, refusal: string): Promise<string>;
  /** The caller of what only the platform may do (every bot's events, provisioning); Forbidden, saying `refusal`, for anyone else. */
  platformFor(ctx: Context, refusal?: string): Promise<void>;
  /** Refuses a bot (Forbidden): the console's page and assets are anyone's else, since they hold no bot's data. */
  notABot(ctx: Context): Promise<void>;
}

export function access(driver: RuntimeDriver, policy: PlatformPolicy, readLimiter: ReadLimiter): Access {
  const callerFor = async (ctx: Context, botId: string | undefined): Promise<Caller> => {
    const caller = await callerOf(ctx, driver, policy);
    if (caller.kind === 'platform') platformConnection(ctx.req.socket);
    // Through a proxy's hop a connection counts against the bot its requests name (connection-limits.ts).
    else if (!namedConnection(ctx.req.socket, caller.botId)) {
      ctx.set('Connection', 'close');
      throw new TooManyRequests(messages.hopConnections(caller.botId), 1);
    }
    if (botId !== undefined) {
      ctx.state.botId = botId;
      authorize(caller, botId);
    }
    return caller;
  };
  return {
    callerFor,
    async readerFor(ctx, botId, cost = 1) {
      const caller = await callerFor(ctx, botId);
      if (caller.kind === 'bot') await readLimiter.take(botId, cost);
      return caller;
    },
    async botItself(ctx, named, refusal) {
      const caller = await callerFor(ctx, named);
      if (caller.kind !== 'bot') throw new Forbidden(refusal);
      ctx.state.botId = caller.botId;
      await readLimiter.take(caller.botId, 1);
      return caller.botId;
    },
    async platformFor(ctx, refusal = messages.platformOnlyEvents) {
      const caller = await callerOf(ctx, driver, policy);
      if (caller.kind !== 'platform') throw new Forbidden(refusal);
      platformConnection(ctx.req.socket);
    },
    async notABot(ctx) {
      const address = ctx.req.socket.remoteAddress;
      if (address !== undefined && (await driver.botAtAddress(plainAddress(address))) !== undefined) throw new Forbidden(messages.consoleForBots);
    },
  };
}
