import type { Middleware } from 'koa';
import { BadRequest } from '../errors.js';

/**
 * Every answer says its content type is what it is meant to be (`nosniff`), and a request's target must be a path
 * (RFC 9112's origin-form, `/api/...`): an absolute target (`GET http://elsewhere/...`) is routed by its path
 * alone by Node's server, so its host would otherwise reach whatever builds a URL from it (docs/api.md §3).
 */
export function requestTarget(): Middleware {
  return (ctx, next) => {
    ctx.set('X-Content-Type-Options', 'nosniff');
    if (!ctx.originalUrl.startsWith('/')) throw new BadRequest('bad request: the request target must be a path beginning with /, not an absolute URL or *');
    return next();
  };
}
