import Koa from 'koa';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { BotLifecycle } from '../lifecycle/bot-lifecycle.js';
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

/** What the app reads of the configuration. */
export type AppConfig = Pick<Config, 'restartTimeoutMs' | 'adminToken' | 'rateLimit' | 'rateWindowMs' | 'readRate'>;

export interface AppDeps {
  readonly driver: RuntimeDriver;
  /** Creates and removes bots; without one, those routes answer 501. */
  readonly provisioner?: Provisioner | undefined;
  readonly config: AppConfig;
  readonly logger: Logger;
}

/** One route the app serves, as `METHOD /path/:param`. */
export type RouteEntry = `${string} ${string}`;

/** The agent's Koa application, the lifecycle it serialises operations through, and its routes. */
export function createApp({ driver, provisioner, config, logger }: AppDeps): { app: Koa; lifecycle: BotLifecycle; routes: RouteEntry[] } {
  const app = new Koa();
  // Every error is answered by `envelope`; none reaches koa's own handler.
  app.silent = true;
  const lifecycle = new BotLifecycle(driver, config.restartTimeoutMs);
  const limiter = new RateLimiter(config.rateLimit, config.rateWindowMs);
  const readLimiter = new ReadLimiter(config.readRate);
  const metrics = new AgentMetrics();
  const audit = auditor(logger, metrics);
  const routers = [
    healthRoutes(driver, metrics),
    botRoutes({ driver, lifecycle, limiter, readLimiter, adminToken: config.adminToken, audit }),
    adminRoutes({ driver, provisioner, adminToken: config.adminToken, audit }),
  ];

  app.use(requestLog(logger, metrics));
  app.use(envelope(metrics));
  app.use(jsonBody());
  for (const router of routers) app.use(router.routes()).use(router.allowedMethods());
  const routes = routers.flatMap((router) =>
    router.stack.flatMap((layer) => layer.methods.filter((m) => m !== 'HEAD').map((m): RouteEntry => `${m} ${layer.path}`)),
  );
  return { app, lifecycle, routes };
}
