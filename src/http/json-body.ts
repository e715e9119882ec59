import { bodyParser } from '@koa/bodyparser';
import type { Middleware } from 'koa';
import { BadRequest, PayloadTooLarge } from '../errors.js';

/** The largest request body the agent reads. */
export const BODY_LIMIT = '16kb';

/**
 * Reads POST bodies as JSON whatever Content-Type they claim (busybox wget,
 * for one, sends form-encoded), since every route takes JSON. An empty body is `{}`.
 */
export function jsonBody(): Middleware {
  return bodyParser({
    enableTypes: ['json'],
    detectJSON: () => true,
    jsonLimit: BODY_LIMIT,
    onError: (err: Error & { status?: number }) => {
      if (err.status === 413) throw new PayloadTooLarge('request body is larger than 16 KiB');
      throw new BadRequest('request body must be a JSON object');
    },
  });
}
