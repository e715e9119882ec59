import Router from '@koa/router';
import type { Context } from 'koa';
import { Forbidden, messages, NotFound, RuntimeUnavailable } from '../errors.js';
import type { OtherNodesRows } from '../fleet/fleet-view.js';
import type { HealthView, Watchdog } from '../health/watchdog.js';
import type { BotHistory } from '../history/bot-history.js';
import type { ExitRecord } from '../history/history-store.js';
import type { BotSummary } from '../provisioning/bot-spec.js';
import type { Provisioner } from '../provisioning/provisioner.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import type { StatsSamples } from '../stats/stats-samples.js';
import type { Access } from './access.js';
import type { ConsoleAsset, ConsoleFiles } from './console-assets.js';
import { SESSION_COOKIE, SESSION_MS } from './console-session.js';
import type { ConsoleSessions } from './console-session.js';
import { isCrossSite } from './cross-site.js';
import { botIdInPath, sessionRequest, validate } from './schemas.js';
import { round2, statusView } from './stats-view.js';

export interface ConsoleRoutesDeps {
  readonly driver: RuntimeDriver;
  /** This agent's node (docs/api.md §17). */
  readonly node: string;
  readonly provisioner: Provisioner | undefined;
  readonly history: BotHistory;
  readonly samples: StatsSamples;
  readonly watchdog: Watchdog;
  readonly sessions: ConsoleSessions;
  readonly access: Access;
  readonly trustedHosts: readonly string[];
  /** A bot's next scheduled run this agent watches, with its first action (docs/api.md §18). */
  readonly nextScheduled?: (botId: string) => { atMs: number; action: string } | undefined;
  /** The built console; undefined when it was not built (its page then says how to build it). */
  readonly files: ConsoleFiles | undefined;
  /** The other nodes' rows of the table (docs/api.md §17); undefined: this node's alone. */
  readonly otherNodesRows?: (() => Promise<OtherNodesRows>) | undefined;
}

/** No inline script or style, nothing from elsewhere, never in a frame (docs/api.md §12). */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** The health of a bot whose node is away: not known here. */
const UNKNOWN_HEALTH = { status: 'none', check: null, since: null, output: null } as const;

function serve(ctx: Context, file: ConsoleAsset, cache: string): void {
  ctx.set('Content-Security-Policy', CONTENT_SECURITY_POLICY);
  ctx.set('Referrer-Policy', 'no-referrer');
  ctx.set('Cache-Control', cache);
  ctx.vary('Accept-Encoding');
  ctx.type = file.type;
  if (ctx.acceptsEncodings('gzip', 'identity') === 'gzip') {
    ctx.set('Content-Encoding', 'gzip');
    ctx.body = file.gzipped;
  } else {
    ctx.body = file.body;
  }
}

async function listing(provisioner: Provisioner | undefined, runtime: string): Promise<BotSummary[]> {
  if (!provisioner) throw new RuntimeUnavailable(`${messages.runtimeUnavailable(runtime)}: its index of bots is being built`);
  return provisioner.list(undefined);
}

function withoutLogs({ logs: _logs, ...exit }: ExitRecord): Omit<ExitRecord, 'logs'> {
  return exit;
}

/**
 * The operator's console (docs/api.md §12): its page and assets, the session
 * that lets a browser be the platform, every bot's status at once for its
 * table, and the samples its charts draw.
 */
export function consoleRoutes({ driver, node, provisioner, history, samples, watchdog, sessions, access, trustedHosts, files, otherNodesRows, nextScheduled }: ConsoleRoutesDeps): Router {
  const router = new Router();

  router.get('/', async (ctx, next) => {
    // Only a browser asking for a page gets it; an API client's GET / stays the 404 it was.
    if (ctx.accepts('json', 'html') !== 'html') return next();
    await access.notABot(ctx);
    if (!files) throw new NotFound('the console was not built: run npm run build');
    serve(ctx, files.page, 'no-cache');
  });

  router.get('/console/:file', async (ctx) => {
    await access.notABot(ctx);
    const file = files?.assets.get(ctx.params.file ?? '');
    if (!file) throw new NotFound(`not found: no console file ${ctx.params.file ?? ''}`);
    // Names carry a hash of their content: a new build is a new name.
    serve(ctx, file, 'public, max-age=31536000, immutable');
  });

  router.post('/api/session', async (ctx) => {
    const { token } = validate(sessionRequest, ctx.request.body);
    await access.notABot(ctx);
    const { host, origin } = ctx.req.headers;
    if (isCrossSite({ host, origin, fetchSite: ctx.get('sec-fetch-site') || undefined }, trustedHosts)) throw new Forbidden(messages.crossSite);
    if (!sessions.available) throw new Forbidden(messages.noSessions);
    if (!sessions.holdsToken(token)) throw new Forbidden(messages.wrongToken);
    // Behind a proxy that ended TLS, the page itself came over HTTPS.
    const secure = ctx.secure || ctx.get('x-forwarded-proto').split(',')[0]?.trim() === 'https';
    ctx.cookies.secure = secure;
    ctx.cookies.set(SESSION_COOKIE, sessions.issue(), { httpOnly: true, sameSite: 'strict', secure, path: '/', maxAge: SESSION_MS, overwrite: true });
    ctx.body = { ok: true, message: 'session started' };
  });

  router.delete('/api/session', async (ctx) => {
    await sessions.end(ctx.cookies.get(SESSION_COOKIE));
    ctx.cookies.set(SESSION_COOKIE, null, { path: '/', overwrite: true });
    ctx.body = { ok: true, message: 'session ended' };
  });

  router.get('/api/bots/:bot_id/stats/history', async (ctx) => {
    const botId = botIdInPath(ctx.params.bot_id);
    await access.platformFor(ctx, messages.platformOnlyConsole);
    await driver.findBot(botId);
    ctx.body = {
      ok: true,
      samples: samples.samples(botId).map((sample) => ({
        at: new Date(sample.at).toISOString(),
        cpu_percent: round2(sample.cpuPercent),
        memory_bytes: sample.memoryBytes,
        network_rx_bytes: sample.networkRxBytes,
        network_tx_bytes: sample.networkTxBytes,
      })),
    };
  });

  router.get('/api/console/fleet', async (ctx) => {
    await access.platformFor(ctx, messages.platformOnlyConsole);
    // From the driver's index, without a call to the runtime (a listing inspects every container); the
    // provisioner's listing asks the runtime while the index is being built.
    const bots = driver.listedBots() ?? (await listing(provisioner, driver.runtime));
    const now = new Date();
    // Asked by another node's agent: this node's rows alone, never the fleet's again.
    const others = otherNodesRows !== undefined && !/^Fleet\s/i.test(ctx.get('authorization')) ? otherNodesRows() : Promise.resolve({ rows: [], lastKnown: [] });
    const [recordOf, { rows, lastKnown }] = await Promise.all([history.tableRecords(bots.map((bot) => bot.bot_id), now), others]);
    // A row's status and records; the last exit without its lines: a thousand bots' lines are no table's business.
    const tableRow = (info: Parameters<typeof statusView>[0], { record, exitsLastHour }: ReturnType<typeof recordOf>, health: HealthView, holder: string) => {
      const { last_exit, ...status } = statusView(info, record, health, now, holder);
      return { ...status, restarts_last_hour: exitsLastHour, last_exit: last_exit && withoutLogs(last_exit) };
    };
    const own = bots.map((bot) => {
      const info = { id: bot.bot_id, ownerId: bot.user_id, running: bot.state === 'running', startedAt: bot.started_at === undefined ? undefined : new Date(bot.started_at) };
      const kept = samples.samples(bot.bot_id);
      const next = nextScheduled?.(bot.bot_id);
      return {
        ...tableRow(info, recordOf(bot.bot_id), watchdog.lastJudged(bot.bot_id), node),
        template: bot.template ?? null,
        image: bot.image ?? null,
        revision: bot.revision,
        next_schedule: next ? { at: new Date(next.atMs).toISOString(), action: next.action } : null,
        sparkline: { cpu_percent: kept.map((sample) => round2(sample.cpuPercent)), memory_bytes: kept.map((sample) => sample.memoryBytes) },
      };
    });
    // A node away (or silent): its bots as its agent last said, their records from the shared history, marked.
    const known = lastKnown.flatMap(({ node: holder, seenAt, bots: held }) => held.map((bot) => ({ holder, seenAt, bot })));
    const knownRecordOf = known.length === 0 ? recordOf : await history.tableRecords(known.map(({ bot }) => bot.botId), now);
    const lastKnownRows = known.map(({ holder, seenAt, bot }) => ({
      ...tableRow({ id: bot.botId, ownerId: undefined, running: bot.running, startedAt: undefined }, knownRecordOf(bot.botId), UNKNOWN_HEALTH, holder),
      template: null,
      image: null,
      revision: null,
      next_schedule: null,
      sparkline: { cpu_percent: [], memory_bytes: [] },
      last_known: seenAt,
    }));
    ctx.body = { ok: true, bots: [...own, ...rows, ...lastKnownRows] };
  });

  return router;
}
