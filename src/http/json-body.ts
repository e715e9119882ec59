import { bodyParser } from '@koa/bodyparser';
import type { Context, Middleware } from 'koa';
import { BadRequest, PayloadTooLarge, UnsupportedMediaType } from '../errors.js';

/** The largest request body the agent reads. */
export const BODY_LIMIT = '16kb';

/** Whether the request carries a body the agent reads: POST is the one method whose routes take one. */
function hasBody(ctx: Context): boolean {
  const { headers } = ctx.req;
  return ctx.method === 'POST' && (headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? 0) > 0);
}

/**
 * Reads request bodies as JSON. A body that declares another Content-Type is a
 * 415 whatever it holds: a web page can send `text/plain` or a form to any
 * address without asking first, `application/json` it cannot (docs/api.md §3).
 * A body with no Content-Type is read as JSON (bots written with plain HTTP
 * clients send none). An empty body is `{}`; one that is not JSON is a 400.
 */
export function jsonBody(): Middleware {
  const parse = bodyParser({
    enableTypes: ['json'],
    detectJSON: () => true,
    jsonLimit: BODY_LIMIT,
    onError: (err: Error & { status?: number }) => {
      if (err.status === 413) throw new PayloadTooLarge('request body is larger than 16 KiB');
      throw new BadRequest('request body must be a JSON object');
    },
  });
  return async (ctx, next) => {
    // A request without a body (every GET) has nothing to read: no parser runs.
    if (!hasBody(ctx)) {
      ctx.request.body = {};
      return next();
    }
    const type = ctx.get('content-type');
    if (type !== '' && !ctx.request.is('json', '+json')) {
      throw new UnsupportedMediaType(`Content-Type ${ctx.request.type || type} is not supported: send a JSON object as application/json`);
    }
    await parse(ctx, next);
  };
}
