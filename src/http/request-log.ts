import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import type { Logger } from 'pino';

const usableRequestId = /^[\w.:-]{1,128}$/;

/**
 * Gives each request an id (the caller's `X-Request-Id` when it is usable),
 * returns it in the response, and logs one line per request once it is answered.
 */
export function requestLog(logger: Logger): Middleware {
  return async (ctx, next) => {
    const started = performance.now();
    const given = ctx.get('x-request-id');
    const requestId = usableRequestId.test(given) ? given : randomUUID();
    ctx.state.requestId = requestId;
    ctx.set('X-Request-Id', requestId);
    try {
      await next();
    } finally {
      logger.info(
        {
          requestId,
          method: ctx.method,
          path: ctx.path,
          status: ctx.status,
          ms: Math.round(performance.now() - started),
          caller: ctx.state.caller,
          botId: ctx.state.botId,
        },
        'request',
      );
    }
  };
}
