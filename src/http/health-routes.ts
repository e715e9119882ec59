import Router from '@koa/router';
import type { RuntimeDriver } from '../runtime/driver.js';

/** `/healthz`: the process answers. `/readyz`: the runtime answers too. */
export function healthRoutes(driver: RuntimeDriver): Router {
  const router = new Router();
  router.get('/healthz', (ctx) => {
    ctx.body = { ok: true, message: 'up' };
  });
  router.get('/readyz', async (ctx) => {
    await driver.ping();
    ctx.body = { ok: true, message: `${driver.runtime} runtime reachable` };
  });
  return router;
}
