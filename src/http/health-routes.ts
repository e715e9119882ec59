import Router from '@koa/router';
import type { AgentMetrics } from './metrics.js';
import { openApiDocument } from './openapi.js';
import type { Readiness } from './readiness.js';

/**
 * `/healthz`: the process answers. `/readyz`: the runtime answers too, and the agent is not stopping.
 * `/metrics`: Prometheus' text format. `/openapi.json`: the API. None of them carries a bot's
 * data, so anyone may read them.
 */
export function healthRoutes(readiness: Readiness, metrics: AgentMetrics): Router {
  const router = new Router();
  router.get('/healthz', (ctx) => {
    ctx.body = { ok: true, message: 'up' };
  });
  router.get('/readyz', async (ctx) => {
    ctx.body = { ok: true, message: await readiness.check() };
  });
  router.get('/openapi.json', (ctx) => {
    ctx.body = openApiDocument;
  });
  router.get('/metrics', async (ctx) => {
    ctx.type = metrics.registry.contentType;
    ctx.body = await metrics.registry.metrics();
  });
  return router;
}
