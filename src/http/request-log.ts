import { randomBytes } from 'node:crypto';
import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import { AgentError, causeOf } from '../errors.js';
import { callerLabel } from './caller.js';
import type { Caller } from './caller.js';
import type { AgentMetrics } from './metrics.js';

const usableRequestId = /^[\w.:-]{1,128}$/;

/**
 * Ids this agent makes: its own random prefix and a count. Unique across agents and restarts
 * like a UUID, at a fraction of the cost of drawing 16 random bytes per request.
 */
const idPrefix = randomBytes(6).toString('hex');
let made = 0;
const newRequestId = (): string => `${idPrefix}-${(made++).toString(36)}`;

/**
 * What the log says of a request's failure: an agent error's message and cause
 * (the socket and errno, the TLS failure, the engine's words); anything else
 * is a bug, logged whole with its stack.
 */
export function failureFields(err: unknown): Record<string, unknown> {
  if (err instanceof AgentError) return { error: err.message, cause: causeOf(err) };
  return { err };
}

/**
 * Gives each request an id (the caller's `X-Request-Id` when it is usable),
 * returns it in the response, and once the request is answered logs one line
 * and counts it in the metrics. A 5xx's line is an error, with its cause.
 */
export function requestLog(logger: Logger, metrics: AgentMetrics): Middleware {
  return async (ctx, next) => {
    const started = performance.now();
    const given = ctx.req.headers['x-request-id'];
    const requestId = typeof given === 'string' && usableRequestId.test(given) ? given : newRequestId();
    ctx.state.requestId = requestId;
    // Straight to node:http: koa's ctx.set builds three arrays and a closure to set one header.
    ctx.res.setHeader('X-Request-Id', requestId);
    try {
      await next();
    } finally {
      const seconds = (performance.now() - started) / 1000;
      // The route pattern, never the raw path: bot ids stay out of the metrics' labels.
      const route = typeof ctx._matchedRoute === 'string' ? ctx._matchedRoute : 'unmatched';
      metrics.answered(ctx.method, route, ctx.status, seconds);
      const line = {
        requestId,
        method: ctx.method,
        route,
        path: ctx.path,
        status: ctx.status,
        ms: Math.round(seconds * 1000),
        caller: callerLabel(ctx.state.caller as Caller | undefined),
        botId: ctx.state.botId,
      };
      // A literal without a spread: V8 builds it from its boilerplate, where a spread (even of nothing) takes a slow path.
      if (ctx.state.failure === undefined) logger.info(line, 'request');
      else logger.error({ ...line, ...failureFields(ctx.state.failure) }, 'request');
    }
  };
}
