import type { Middleware } from 'koa';
import { AgentError, OperationFailed, RuntimeUnavailable, TooManyRequests } from '../errors.js';
import type { AgentMetrics } from './metrics.js';

/** Texts for statuses that koa or the router set without a body. */
const bareStatusText: Record<number, string> = {
  404: 'not found: no such route',
  405: 'method not allowed',
  501: 'not implemented',
};

interface HttpLikeError {
  status?: number;
  expose?: boolean;
  message?: string;
}

/** The status and client-safe text for anything thrown while answering. */
function failureOf(err: unknown): { status: number; msg: string } {
  if (err instanceof AgentError) return { status: err.status, msg: err.message };
  const { status, expose, message } = (err ?? {}) as HttpLikeError;
  // http-errors from koa and its middleware mark what a client may see with `expose`.
  if (expose && typeof status === 'number' && status >= 400 && status < 500 && message) return { status, msg: message };
  return { status: 500, msg: 'internal error' };
}

/**
 * The one place that turns failures into `{ok:false,msg}` with a status.
 * Responses that carry no body get the envelope too, so that every answer is JSON with `ok`.
 * A 5xx's error is kept in `ctx.state.failure` for the request's log line, which says its cause.
 */
export function envelope(metrics: AgentMetrics): Middleware {
  return async (ctx, next) => {
    try {
      await next();
      // koa leaves no body on its 404; the router's OPTIONS and 405 answers leave an empty one.
      if (ctx.body === undefined || ctx.body === null || ctx.body === '') {
        const status = ctx.status;
        ctx.body = status >= 400 ? { ok: false, msg: bareStatusText[status] ?? 'request failed' } : { ok: true };
        // Setting a body on koa's implicit 404 would turn it into a 200.
        ctx.status = status;
      }
    } catch (err) {
      const { status, msg } = failureOf(err);
      if (status >= 500) ctx.state.failure = err;
      if (err instanceof TooManyRequests) ctx.set('Retry-After', String(err.retryAfterS));
      if (err instanceof RuntimeUnavailable) metrics.runtimeErrors.inc({ kind: 'unavailable' });
      if (err instanceof OperationFailed) metrics.runtimeErrors.inc({ kind: 'failed' });
      ctx.status = status;
      ctx.body = { ok: false, msg };
    }
  };
}
