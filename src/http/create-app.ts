import Koa from 'koa';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { BotLifecycle } from '../lifecycle/bot-lifecycle.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import { botRoutes } from './bot-routes.js';
import { envelope } from './envelope.js';
import { healthRoutes } from './health-routes.js';
import { jsonBody } from './json-body.js';
import { requestLog } from './request-log.js';

export interface AppDeps {
  readonly driver: RuntimeDriver;
  readonly config: Pick<Config, 'restartTimeoutMs' | 'adminToken'>;
  readonly logger: Logger;
}

/** The agent's Koa application, and the lifecycle it serialises operations through. */
export function createApp({ driver, config, logger }: AppDeps): { app: Koa; lifecycle: BotLifecycle } {
  const app = new Koa();
  // Every error is answered by `envelope`; none reaches koa's own handler.
  app.silent = true;
  const lifecycle = new BotLifecycle(driver, config.restartTimeoutMs);
  const routers = [healthRoutes(driver), botRoutes({ driver, lifecycle, adminToken: config.adminToken, logger })];

  app.use(requestLog(logger));
  app.use(envelope(logger));
  app.use(jsonBody());
  for (const router of routers) app.use(router.routes()).use(router.allowedMethods());
  return { app, lifecycle };
}
