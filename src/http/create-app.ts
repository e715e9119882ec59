import Router from '@koa/router';
import Koa from 'koa';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { BotLifecycle } from '../lifecycle/bot-lifecycle.js';
import type { BotLocks } from '../lifecycle/bot-locks.js';
import { RateLimiter } from '../lifecycle/rate-limiter.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import type { Provisioner } from '../provisioning/provisioner.js';
import { adminRoutes } from './admin-routes.js';
import { auditor } from './audit.js';
import { botRoutes } from './bot-routes.js';
import { envelope } from './envelope.js';
import { healthRoutes } from './health-routes.js';
import { jsonBody } from './json-body.js';
import { AgentMetrics } from './metrics.js';
import { ReadLimiter } from './read-limiter.js';
import { requestLog } from './request-log.js';
import { BotHistory } from '../history/bot-history.js';
import type { HistoryStore } from '../history/history-store.js';
import { PostgresHistoryStore } from '../history/postgres-store.js';
import { SqliteHistoryStore } from '../history/sqlite-store.js';
import { WebhookSender } from '../history/webhook.js';
import { access } from './access.js';
import { historyRoutes } from './history-routes.js';
import { LogFollowing } from './log-follow.js';
import { StreamLimits } from './stream-limits.js';
import { LogReads } from './log-reads.js';

/** What the app reads of the configuration. */
export type AppConfig = Pick<
  Config,
  'restartTimeoutMs' | 'adminToken' | 'rateLimit' | 'rateWindowMs' | 'readRate' | 'dataDir' | 'databaseUrl' | 'webhook' | 'trustedHosts' | 'provisioning'
>;

export interface AppDeps {
  readonly driver: RuntimeDriver;
  /** Creates and removes bots; without one, those routes answer 501. */
  readonly provisioner?: Provisioner | undefined;
  readonly config: AppConfig;
  readonly logger: Logger;
  /** Tests shorten how long a crash-looping bot must run to recover. */
  readonly recoverAfterMs?: number;
  /** Serialises lifecycle operations across agents (a Lease per bot on Kubernetes); this agent's own queue alone by default. */
  readonly locks?: BotLocks;
}

/** The agent's app and what it runs beside it. */
export interface App {
  readonly app: Koa;
  /** Lifecycle operations, serialised per bot; `drain()` waits for those under way. */
  readonly lifecycle: BotLifecycle;
  readonly history: BotHistory;
  readonly routes: RouteEntry[];
  /** Stops following the runtime and sending webhooks, and closes the store (after the driver). */
  close(): Promise<void>;
  /** Resolves once the history's store can be used; rejects when it cannot be reached. */
  opened(): Promise<void>;
}

/**
 * OPTIONS, and 405 with `Allow` for a method a known path does not serve:
 * the router answers a method it does not know at all (TRACE, ...) with 501,
 * which is no fault of the agent's (CONTRACT.md §3).
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
  return async (ctx, next) => {
    const methods = served.get(ctx.path);
    if (methods === undefined || methods.has(ctx.method)) return next();
    ctx.set('Allow', [...methods].join(', '));
    ctx.status = ctx.method === 'OPTIONS' ? 200 : 405;
    ctx.body = '';
  };
}

/** One route the app serves, as `METHOD /path/:param`. */
export type RouteEntry = `${string} ${string}`;

/** The agent's Koa application, the lifecycle it serialises operations through, and its routes. */
export function createApp({ driver, provisioner, config, logger, recoverAfterMs, locks }: AppDeps): App {
  const app = new Koa();
  // Every error is answered by `envelope`; none reaches koa's own handler.
  app.silent = true;
  const lifecycle = new BotLifecycle(driver, config.restartTimeoutMs, locks);
  const readLimiter = new ReadLimiter(config.readRate);
  const metrics = new AgentMetrics();
  const report = (what: string, err: unknown): void => logger.warn({ err }, what);
  const store: HistoryStore = config.databaseUrl
    ? new PostgresHistoryStore(config.databaseUrl, report)
    : new SqliteHistoryStore(config.dataDir);
  // Agents sharing a store share each bot's lifecycle budget too.
  const limiter = new RateLimiter(config.rateLimit, config.rateWindowMs, Date.now, store.operationWindow);
  const webhook = config.webhook && new WebhookSender(store, { ...config.webhook, report });
  const history = new BotHistory(store, (botId) => driver.findBot(botId), {
    recoverAfterMs,
    report,
    deliver: webhook !== undefined,
    onKept: (event) => metrics.historyEvent(event),
  });
  // Deliveries queued by any agent sharing the store are tried as their events arrive.
  if (webhook) history.follow(() => webhook.kick());
  metrics.crashLoopingBots(() => store.crashLoopingCount());
  metrics.indexedBots(() => driver.indexedBots());
  webhook?.kick();
  // Runs are watched once the history says since when (a runtime replays what came after).
  const watching = history.lastSeen().then(
    (since) => driver.observeRuns(history, since),
    (err: unknown) => {
      report('the history could not be read; watching runs from now', err);
      driver.observeRuns(history, undefined);
    },
  );
  const audit = auditor(logger, metrics, (operation, botId, result, by) => {
    if (operation === 'restart' || operation === 'stop' || operation === 'start') void history.operationEnded(botId, operation, result, by);
  });
  const checks = access(driver, config, readLimiter);
  const streams = new StreamLimits();
  // One router holds every route (mounting copies their layers): a request is matched once, not once per group.
  const router = new Router().use(
    healthRoutes(driver, metrics).routes(),
    botRoutes({ driver, lifecycle, limiter, access: checks, audit, logFollowing: new LogFollowing(driver, history, streams), logReads: new LogReads() }).routes(),
    historyRoutes({ driver, history, access: checks, streams }).routes(),
    adminRoutes({ driver, provisioner, access: checks, audit, history, provisioning: config.provisioning }).routes(),
  );

  app.use(requestLog(logger, metrics));
  app.use(envelope(metrics));
  app.use(jsonBody());
  app.use(literalPathsFirst(router));
  app.use(router.routes()).use(allowedMethods(router));
  const routes = router.stack.flatMap((layer) => layer.methods.filter((m) => m !== 'HEAD').map((m): RouteEntry => `${m} ${layer.path}`));
  const close = async (): Promise<void> => {
    await watching;
    await driver.close();
    await webhook?.close();
    await history.close();
    await store.close();
  };
  return { app, lifecycle, history, routes, close, opened: () => store.opened() };
}
