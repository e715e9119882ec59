import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import type { AgentMetrics } from './metrics.js';

const usableRequestId = /^[\w.:-]{1,128}$/;

/**
 * Gives each request an id (the caller's `X-Request-Id` when it is usable),
 * returns it in the response, and once the request is answered logs one line
 * and counts it in the metrics.
 */
export function requestLog(logger: Logger, metrics: AgentMetrics): Middleware {
  return async (ctx, next) => {
    const started = performance.now();
    const given = ctx.get('x-request-id');
    const requestId = usableRequestId.test(given) ? given : randomUUID();
    ctx.state.requestId = requestId;
    ctx.set('X-Request-Id', requestId);
    try {
      await next();
    } finally {
      const seconds = (performance.now() - started) / 1000;
      // The route pattern, never the raw path: bot ids stay out of the metrics' labels.
      const route = typeof ctx._matchedRoute === 'string' ? ctx._matchedRoute : 'unmatched';
      metrics.answered(ctx.method, route, ctx.status, seconds);
      logger.info(
        {
          requestId,
          method: ctx.method,
          route,
          path: ctx.path,
          status: ctx.status,
          ms: Math.round(seconds * 1000),
          caller: ctx.state.caller,
          botId: ctx.state.botId,
        },
        'request',
      );
    }
  };
}
