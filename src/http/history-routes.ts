import Router from '@koa/router';
import type { Context } from 'koa';
import { BadRequest } from '../errors.js';
import type { BotHistory } from '../history/bot-history.js';
import type { Watchdog } from '../health/watchdog.js';
import { REVISIONS_KEPT, seqOf } from '../history/history-store.js';
import type { StoredEvent } from '../history/history-store.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import type { Access } from './access.js';
import { botIdInPath, DEFAULT_EXITS, eventsQuery, exitsQuery, validateQuery } from './schemas.js';
import { sseOf } from './sse.js';
import type { StreamLimits } from './stream-limits.js';
import { statusView } from './stats-view.js';
import type { DataUsage } from '../data/data-usage.js';
import type { RevisionRuntime } from '../provisioning/revisions.js';

export interface HistoryRoutesDeps {
  readonly driver: RuntimeDriver;
  readonly history: BotHistory;
  readonly watchdog: Watchdog;
  readonly access: Access;
  readonly streams: StreamLimits;
  /** The runtime's revisions, where it keeps them (docs/api.md §15): the one each bot runs now. */
  readonly revisions?: Pick<RevisionRuntime, 'current'> | undefined;
  /** This agent's node (docs/api.md §17), which holds every bot it answers for. */
  readonly node: string;
  /** The bytes bots' data folders use, as last measured (docs/api.md §19). */
  readonly dataUsage?: Pick<DataUsage, 'of'> | undefined;
}

/** The operations at /api/bots/<name>, which only POST reaches. */
const POST_ONLY = new Set(['restart', 'stop', 'start', 'logs']);

/** The cursor a client resumes from: `Last-Event-ID`, else `?after=`; undefined for live events only. */
function resumeCursor(ctx: Context, after: string | undefined): number | undefined {
  const given = ctx.get('last-event-id') || after;
  if (given === undefined || given === '') return undefined;
  const seq = seqOf(given);
  if (seq === undefined) throw new BadRequest('Last-Event-ID (or after) must be an event id the agent sent');
  return seq;
}


/**
 * Streams events: first those kept after the cursor, then live ones. Live
 * events that arrive while the kept ones are sent wait, and are sent after
 * them unless already sent.
 */
async function streamEvents(
  ctx: Context,
  history: BotHistory,
  streams: StreamLimits,
  botId: string | undefined,
  cursor: number | undefined,
  byBot = false,
): Promise<void> {
  const stream = streams.open(ctx, botId, byBot);
  const waiting: StoredEvent[] = [];
  let replaying = true;
  let lastSent = cursor ?? 0;
  const send = (event: StoredEvent): void => {
    if (event.seq <= lastSent) return;
    lastSent = event.seq;
    stream.send(sseOf(event));
  };
  const unfollow = history.follow((event) => {
    if (botId !== undefined && event.botId !== botId) return;
    if (replaying) waiting.push(event);
    else send(event);
  });
  void stream.ended().then(unfollow);
  if (cursor !== undefined) {
    for await (const event of history.eventsAfter(cursor, botId)) {
      if (stream.closed) break;
      send(event);
    }
  }
  replaying = false;
  for (const event of waiting.splice(0)) send(event);
}

/** Status, exit records, events and live logs of bots (docs/api.md §§8-10). */
export function historyRoutes({ driver, history, watchdog, access, streams, revisions, node, dataUsage }: HistoryRoutesDeps): Router {
  const router = new Router();
  const { readerFor, platformFor } = access;

  router.get('/api/bots/:bot_id', async (ctx) => {
    // GET of a path that is one of the bot operations is a wrong method, not a bad bot id.
    if (POST_ONLY.has(ctx.params.bot_id ?? '')) {
      ctx.status = 405;
      ctx.set('Allow', 'POST');
      return;
    }
    const botId = botIdInPath(ctx.params.bot_id);
    await readerFor(ctx, botId);
    const now = new Date();
    const [bot, record] = await Promise.all([driver.findBot(botId), history.record(botId, now)]);
    const data = (bot.dataFolders ?? []).map((path) => {
      const use = dataUsage?.of(botId, path);
      return { path, size_mb: use?.sizeMb ?? null, used_bytes: use?.bytes ?? null, measured_at: use?.at ?? null };
    });
    ctx.body = { ok: true, bot: { ...statusView(bot, record, watchdog.healthOf(bot, now.getTime()), now, node), data } };
  });

  router.get('/api/bots/:bot_id/exits', async (ctx) => {
    const botId = botIdInPath(ctx.params.bot_id);
    const { limit = DEFAULT_EXITS } = validateQuery(exitsQuery, ctx.query);
    await readerFor(ctx, botId);
    await driver.findBot(botId).catch(async (err: unknown) => {
      // A bot that is gone still has its records; only one never seen is unknown.
      if ((await history.exits(botId, 1)).length === 0) throw err;
    });
    ctx.body = { ok: true, exits: await history.exits(botId, limit) };
  });

  router.get('/api/bots/:bot_id/revisions', async (ctx) => {
    const botId = botIdInPath(ctx.params.bot_id);
    await readerFor(ctx, botId);
    // Where the runtime has no deploys yet, none are kept: the list is empty, and says why.
    const kept = revisions ? await history.revisions(botId, REVISIONS_KEPT) : [];
    // A bot never deployed has none kept; one never seen is unknown.
    if (kept.length === 0) await driver.findBot(botId);
    // A bot gone (its records outlive it) runs none.
    const current = revisions ? await revisions.current(botId).then((now) => now.revision, () => null) : null;
    ctx.body = { ok: true, revisions: kept, deploys: revisions !== undefined, current };
  });

  router.get('/api/bots/:bot_id/events', async (ctx) => {
    const botId = botIdInPath(ctx.params.bot_id);
    const { after } = validateQuery(eventsQuery, ctx.query);
    const cursor = resumeCursor(ctx, after);
    const caller = await readerFor(ctx, botId);
    await driver.findBot(botId);
    await streamEvents(ctx, history, streams, botId, cursor, caller.kind === 'bot');
  });

  router.get('/api/events', async (ctx) => {
    const { after } = validateQuery(eventsQuery, ctx.query);
    const cursor = resumeCursor(ctx, after);
    await platformFor(ctx);
    await streamEvents(ctx, history, streams, undefined, cursor);
  });

  return router;
}
