import { bodyParser } from '@koa/bodyparser';
import type { Middleware } from 'koa';
import { BadRequest, PayloadTooLarge, UnsupportedMediaType } from '../errors.js';

/** The largest request body the agent reads. */
export const BODY_LIMIT = '16kb';

/**
 * Reads POST bodies as JSON whatever Content-Type they claim (busybox wget,
 * for one, sends form-encoded), since every route takes JSON. An empty body is
 * `{}`. A body that is not JSON is a 400, or a 415 when it says it is something else.
 */
export function jsonBody(): Middleware {
  return bodyParser({
    enableTypes: ['json'],
    detectJSON: () => true,
    jsonLimit: BODY_LIMIT,
    onError: (err: Error & { status?: number }, ctx) => {
      if (err.status === 413) throw new PayloadTooLarge('request body is larger than 16 KiB');
      const type = ctx.request.type;
      if (type && !ctx.request.is('json', '+json')) {
        throw new UnsupportedMediaType(`Content-Type ${type} is not supported: send a JSON object as application/json`);
      }
      throw new BadRequest('request body must be a JSON object');
    },
  });
}
