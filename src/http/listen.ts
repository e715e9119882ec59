import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { once } from 'node:events';
import type Koa from 'koa';
import { DEFAULT_CONNECTION_LIMITS, limitConnections, serverTimeouts } from './connection-limits.js';
import type { ConnectionLimits } from './connection-limits.js';

/**
 * Connections the kernel holds for the agent to take up, where Node asks for 511: a host's bots calling at
 * once (all started again after a reboot, say) found the queue full, and each one past it lost a second
 * to its SYN being dropped and sent again. The kernel caps it at net.core.somaxconn (4,096 since Linux 5.4).
 */
const LISTEN_BACKLOG = 4_096;

/**
 * Serves the app on host:port, within the connection limits, and resolves
 * once it listens. Throws what listen fails with (address in use, no such address).
 */
export async function listen(app: Koa, host: string, port: number, limits: ConnectionLimits = DEFAULT_CONNECTION_LIMITS): Promise<Server> {
  const server = createServer(serverTimeouts(limits), app.callback());
  limitConnections(server, limits);
  // Shell clients such as busybox nc close their sending side once the request
  // is out; Node would then drop the answer unless half-open sockets are kept.
  Object.assign(server, { httpAllowHalfOpen: true });
  server.listen({ port, host, backlog: LISTEN_BACKLOG });
  await Promise.race([once(server, 'listening'), once(server, 'error').then(([err]) => Promise.reject(err))]);
  return server;
}
