import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { once } from 'node:events';
import type Koa from 'koa';

/**
 * Serves the app on host:port and resolves once it listens. Throws what
 * listen fails with (address in use, no such address).
 */
export async function listen(app: Koa, host: string, port: number): Promise<Server> {
  const server = createServer(app.callback());
  // Shell clients such as busybox nc close their sending side once the request
  // is out; Node would then drop the answer unless half-open sockets are kept.
  Object.assign(server, { httpAllowHalfOpen: true });
  server.listen(port, host);
  await Promise.race([once(server, 'listening'), once(server, 'error').then(([err]) => Promise.reject(err))]);
  return server;
}
