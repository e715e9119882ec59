import type { Context, Middleware } from 'koa';
import coBody from 'co-body';
import { BadRequest, PayloadTooLarge, UnsupportedMediaType } from '../errors.js';

/** The largest request body the agent reads. */
export const BODY_LIMIT = '16kb';

declare module 'koa' {
  interface Request {
    /** The JSON the request carried; `{}` when it carried none. */
    body?: unknown;
  }
}

/** Whether the request carries a body the agent reads: POST, PUT and PATCH are the methods whose routes take one. */
function hasBody(ctx: Context): boolean {
  return (ctx.method === 'POST' || ctx.method === 'PUT' || ctx.method === 'PATCH') && carriesBody(ctx);
}

/** Whether the request came with a body at all (a route whose body is required refuses one without). */
export function carriesBody(ctx: Context): boolean {
  const { headers } = ctx.req;
  return headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? 0) > 0;
}

/**
 * co-body's options, with the one its types leave out: a `__proto__` key (or a `constructor` holding a
 * `prototype`) is dropped like any other field the agent does not know, rather than failing the request
 * (co-body's default), since the document lets a body carry fields the agent ignores.
 */
const PARSE_OPTIONS = { limit: BODY_LIMIT, strict: true, onProtoPoisoning: 'remove' } as coBody.Options;

/**
 * Reads request bodies as JSON. A body that declares another Content-Type is a
 * 415 whatever it holds: a web page can send `text/plain` or a form to any
 * address without asking first, `application/json` it cannot (docs/api.md §3).
 * A body with no Content-Type is read as JSON (bots written with plain HTTP
 * clients send none). An empty body is `{}`; one that is not JSON is a 400.
 */
export function jsonBody(): Middleware {
  // A request without a body (every GET) has nothing to read: no parser runs, and no promise of this layer's own.
  return (ctx, next) => {
    if (!hasBody(ctx)) {
      ctx.request.body = {};
      return next();
    }
    return parsed(ctx, next);
  };
}

/** The request's JSON body, read before the layers after this one run. */
async function parsed(ctx: Context, next: () => Promise<unknown>): Promise<unknown> {
  const type = ctx.get('content-type');
  if (type !== '' && !ctx.request.is('json', '+json')) {
    throw new UnsupportedMediaType(`Content-Type ${ctx.request.type || type} is not supported: send a JSON object as application/json`);
  }
  try {
    ctx.request.body = await coBody.json(ctx, PARSE_OPTIONS);
  } catch (err) {
    if ((err as { status?: number }).status === 413) throw new PayloadTooLarge('request body is larger than 16 KiB');
    throw new BadRequest('request body must be a JSON object');
  }
  return next();
}
