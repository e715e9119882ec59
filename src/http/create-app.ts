import Router from '@koa/router';
import Koa from 'koa';
import type { Logger } from 'pino';
import { DEFAULT_BOT_CHAT_BASE } from '../config.js';
import type { Config } from '../config.js';
import { hopsOf } from './hops.js';
import type { BotHistory } from '../history/bot-history.js';
import type { Heartbeats } from '../health/heartbeats.js';
import type { Watchdog } from '../health/watchdog.js';
import type { BotLifecycle } from '../lifecycle/bot-lifecycle.js';
import type { RateLimiter } from '../lifecycle/rate-limiter.js';
import type { Deploys } from '../deploys/deploys.js';
import type { Provisioner } from '../provisioning/provisioner.js';
import type { BotTokenVerifier } from '../identity/bot-tokens.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import type { StatsSamples } from '../stats/stats-samples.js';
import { access } from './access.js';
import { adminRoutes } from './admin-routes.js';
import { chatRoutes } from './chat-routes.js';
import { nodeRoutes } from './node-routes.js';
import { scheduleRoutes } from './schedule-routes.js';
import { backupRoutes } from './backup-routes.js';
import { logHistoryRoutes } from './log-history-routes.js';
import { alertRoutes } from './alert-routes.js';
import type { AlertStore } from '../alerts/alert-store.js';
import type { Alerting } from '../alerts/alerting.js';
import type { LogCollector } from '../log-history/log-collector.js';
import type { DataUsage } from '../data/data-usage.js';
import type { Backups } from '../backups/backups.js';
import type { Scheduler } from '../schedules/scheduler.js';
import type { ScheduleStore } from '../schedules/schedule-store.js';
import { fleetRoutes } from './fleet-routes.js';
import type { PlacementFence } from '../fleet/placement-fence.js';
import { DEFAULT_PULL_TIMEOUT_MS } from '../runtime/pull-failure.js';
import { forwardToNode } from './node-forward.js';
import type { NodeBeacon } from '../fleet/node-beacon.js';
import { otherNodesRows } from '../fleet/fleet-view.js';
import { auditor } from './audit.js';
import { botRoutes } from './bot-routes.js';
import type { ConsoleFiles } from './console-assets.js';
import { consoleRoutes } from './console-routes.js';
import { ConsoleSessions } from './console-session.js';
import { envelope } from './envelope.js';
import { healthRoutes } from './health-routes.js';
import { historyRoutes } from './history-routes.js';
import { jsonBody } from './json-body.js';
import { LogFollowing } from './log-follow.js';
import { LogReads } from './log-reads.js';
import type { Readiness } from './readiness.js';
import type { AgentMetrics } from './metrics.js';
import { ReadLimiter } from './read-limiter.js';
import { requestLog } from './request-log.js';
import { requestTarget } from './request-target.js';
import { StreamLimits } from './stream-limits.js';

/** What a move's create on another node has beyond its image's pull: making and starting the container. */
const MOVE_MARGIN_MS = 30_000;

/** What the HTTP layer reads of the configuration. */
export type HttpConfig = Pick<Config, 'adminToken' | 'readRate' | 'trustedHosts' | 'provisioning' | 'loopbackPlatform' | 'identity' | 'proxyAddresses'> &
  Partial<Pick<Config, 'chats' | 'botChatBase' | 'fleetKey' | 'restartTimeoutMs' | 'pullTimeoutMs'>>;

/** What the routes act on, built by the agent (src/agent.ts). */
export interface AppDeps {
  readonly driver: RuntimeDriver;
  /** Creates and removes bots; without one, those routes answer 501. */
  readonly provisioner?: Provisioner | undefined;
  /** Deploys and rollbacks, where the runtime has revisions (docs/api.md §15). */
  readonly deploys?: Deploys | undefined;
  readonly lifecycle: BotLifecycle;
  readonly limiter: RateLimiter;
  readonly history: BotHistory;
  readonly metrics: AgentMetrics;
  /** Every running bot's recent CPU and memory, for the console. */
  readonly samples: StatsSamples;
  /** Every bot's health, and the watchdog that acts on it (docs/api.md §13). */
  readonly watchdog: Watchdog;
  readonly heartbeats: Heartbeats;
  /** What `/readyz` answers. */
  readonly readiness: Readiness;
  /** Names bots by their tokens: those the agent signs (Docker), or the cluster's (Kubernetes); none: no token names a bot. */
  readonly botTokens?: BotTokenVerifier | undefined;
  /** The built console; undefined where it was not built. */
  readonly console?: ConsoleFiles | undefined;
  readonly config: HttpConfig;
  readonly logger: Logger;
  /** This agent's node, and the fleet's (docs/api.md §17). */
  readonly nodes: Pick<NodeBeacon, 'node' | 'nodes' | 'nodeOfBot' | 'nodeNamed' | 'botsOf'>;
  /** The fleet's placements of moved bots (docs/fleet.md), within a fleet (AGENT_FLEET_KEY). */
  readonly fence?: PlacementFence | undefined;
  /** A bot's schedules (docs/api.md §18): where they are kept, and the clock that runs them. */
  readonly schedules?: { readonly store: ScheduleStore; readonly scheduler: Scheduler } | undefined;
  /** Backups of bots' data (docs/api.md §20), where the runtime keeps bots' data. */
  readonly backups?: Backups | undefined;
  /** The bytes bots' data folders use, as last measured (docs/api.md §19). */
  readonly dataUsage?: DataUsage | undefined;
  /** Every bot's log history (docs/api.md §21), where the agent keeps one. */
  readonly logHistory?: LogCollector | undefined;
  /** Alert rules and what fires them (docs/api.md §22). */
  readonly alerts?: { readonly store: AlertStore; readonly alerting: Alerting } | undefined;
  /** Told of each operation asked for a bot through the API (lifecycle, deploy, removal) before it runs. */
  readonly onAsked?: ((botId: string) => void) | undefined;
}

/** The agent's Koa application and the routes it serves. */
export interface App {
  readonly app: Koa;
  readonly routes: RouteEntry[];
}

/**
 * OPTIONS, and 405 with `Allow` for a method a known path does not serve:
 * the router answers a method it does not know at all (TRACE, ...) with 501,
 * which is no fault of the agent's (docs/api.md §3).
 */
function allowedMethods(router: Router): Koa.Middleware {
  const answer = router.allowedMethods() as Koa.Middleware;
  return async (ctx, next) => {
    await answer(ctx, next);
    if (ctx.status === 501) ctx.status = 405;
  };
}

/**
 * A path the app serves literally (`/api/bots/stop`) is served by its own
 * routes only, as routers that rank static routes first do: without this,
 * `GET /api/bots/:bot_id` would also take `GET /api/bots/stop` (a 400 for a
 * bad bot id) and `OPTIONS` would list GET for it. Other methods there are a
 * 405 with the literal routes' `Allow`; OPTIONS answers that `Allow`.
 */
function literalPathsFirst(router: Router): Koa.Middleware {
  const served = new Map<string, Set<string>>();
  for (const layer of router.stack) {
    if (typeof layer.path !== 'string' || layer.paramNames.length > 0 || layer.methods.length === 0) continue;
    const methods = served.get(layer.path) ?? new Set<string>();
    for (const method of layer.methods) methods.add(method);
    served.set(layer.path, methods);
  }
  return (ctx, next) => {
    const methods = served.get(ctx.path);
    if (methods === undefined || methods.has(ctx.method)) return next();
    ctx.set('Allow', [...methods].join(', '));
    ctx.status = ctx.method === 'OPTIONS' ? 200 : 405;
    ctx.body = '';
    return Promise.resolve();
  };
}

/** One route the app serves, as `METHOD /path/:param`. */
export type RouteEntry = `${string} ${string}`;

/**
 * The agent's HTTP adapter: middleware and routes mounted on what it is handed.
 * Who may call what, read and stream limits, and the audit of lifecycle
 * operations live here; what they act on is built in src/agent.ts.
 */
export function createApp({ driver, provisioner, deploys, lifecycle, limiter, history, metrics, samples, watchdog, heartbeats, readiness, botTokens, console: files, config, logger, nodes, fence, onAsked, schedules, backups, dataUsage, logHistory, alerts }: AppDeps): App {
  const app = new Koa();
  // Every error is answered by `envelope`; none reaches koa's own handler.
  app.silent = true;
  const audit = auditor(logger, metrics, (operation, botId, result, by) => {
    if (operation === 'restart' || operation === 'stop' || operation === 'start') void history.operationEnded(botId, operation, result, by);
  }, (_operation, botId) => onAsked?.(botId));
  const sessions = new ConsoleSessions(config.adminToken, Date.now, {
    end: (nonce, untilMs) => history.endSession(nonce, untilMs),
    ended: (nonce) => history.sessionEnded(nonce),
  });
  const policy = { ...config, sessions, botTokens, isHop: hopsOf(config.identity, config.proxyAddresses) };
  const checks = access(driver, policy, new ReadLimiter(config.readRate));
  const streams = new StreamLimits();
  // One router holds every route (mounting copies their layers): a request is matched once, not once per group.
  const router = new Router().use(
    healthRoutes(readiness, metrics).routes(),
    botRoutes({ driver, lifecycle, limiter, heartbeats, access: checks, audit, logFollowing: new LogFollowing(driver, history, streams), logReads: new LogReads() }).routes(),
    historyRoutes({ driver, history, watchdog, access: checks, streams, revisions: provisioner?.revisions, node: nodes.node, dataUsage }).routes(),
    adminRoutes({ driver, provisioner, deploys, access: checks, audit, history, botTokens, provisioning: config.provisioning, node: nodes.node, fence, logHistory }).routes(),
    chatRoutes({ driver, history, access: checks, chats: config.chats, botChatBase: config.botChatBase ?? DEFAULT_BOT_CHAT_BASE }).routes(),
    nodeRoutes({ nodes, access: checks }).routes(),
    backupRoutes({ backups, access: checks, runtime: driver.runtime }).routes(),
    logHistoryRoutes({ driver, logHistory, access: checks, node: nodes.node, fleet: config.fleetKey === undefined ? undefined : { nodes, fleetKey: config.fleetKey } }).routes(),
    ...(alerts ? [alertRoutes({ driver, alerts, linesKept: logHistory !== undefined, access: checks }).routes()] : []),
    ...(schedules ? [scheduleRoutes({ driver, store: schedules.store, scheduler: schedules.scheduler, access: checks, deploys: deploys !== undefined, backups: backups !== undefined }).routes()] : []),
    fleetRoutes({
      move: {
        node: nodes.node,
        fleetKey: config.fleetKey,
        nodes,
        runtime: driver.runtime,
        lifecycle,
        placements: fence,
        provisioner,
        createDeadlineMs: (config.pullTimeoutMs ?? DEFAULT_PULL_TIMEOUT_MS) + MOVE_MARGIN_MS,
        history,
        report: (what, err) => logger.warn({ err: String(err) }, what),
        backups,
      },
      access: checks,
      audit,
      provisioning: config.provisioning,
    }).routes(),
    consoleRoutes({
      driver,
      provisioner,
      history,
      samples,
      watchdog,
      sessions,
      access: checks,
      trustedHosts: config.trustedHosts,
      files,
      node: nodes.node,
      nextScheduled: schedules ? (botId) => schedules.scheduler.nextOfBot(botId) : undefined,
      otherNodesRows: config.fleetKey === undefined ? undefined : otherNodesRows(nodes, config.fleetKey, (what, err) => logger.warn({ err: String(err) }, what)),
    }).routes(),
  );

  app.use(requestLog(logger, metrics));
  app.use(envelope(metrics));
  app.use(requestTarget());
  app.use(jsonBody());
  // Before the routes: a platform call for another node's bot is that node's to answer (docs/api.md §17).
  app.use(forwardToNode({ node: nodes.node, fleetKey: config.fleetKey, driver, store: nodes, fence, policy, deadlineMs: config.restartTimeoutMs ?? 60_000 }));
  app.use(literalPathsFirst(router));
  app.use(router.routes()).use(allowedMethods(router));
  const routes = router.stack.flatMap((layer) => layer.methods.filter((m) => m !== 'HEAD').map((m): RouteEntry => `${m} ${layer.path}`));
  return { app, routes };
}
