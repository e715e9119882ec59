import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { DockerOptions } from 'dockerode';

/**
 * Connections to the engine are kept open between calls, at most this many idle, each closed after 5 s idle (as
 * Node's global agent would, with 256): opening one for every call would cost a logs read about as much as the
 * engine's own answer. How many are in use at once is bounded by the agent's own limits on reads, streams and
 * operations.
 */
const IDLE_CONNECTIONS = 16;
const IDLE_MS = 5_000;

/**
 * dockerode options for a DOCKER_HOST value, read as the docker CLI reads it:
 * `unix:///path` is a socket, `tcp://host:port` plain HTTP, `https://` TLS;
 * each with connections kept alive between calls (docker-modem's `agent`).
 */
export function dockerConnection(dockerHost: string): DockerOptions & { agent: HttpAgent } {
  const url = new URL(dockerHost);
  const kept = { keepAlive: true, maxFreeSockets: IDLE_CONNECTIONS, timeout: IDLE_MS, scheduling: 'lifo' as const };
  if (url.protocol === 'unix:') return { socketPath: url.pathname, agent: new HttpAgent(kept) };
  const secure = url.protocol === 'https:';
  return {
    protocol: secure ? 'https' : 'http',
    host: url.hostname,
    port: Number(url.port) || (secure ? 2376 : 2375),
    agent: secure ? new HttpsAgent(kept) : new HttpAgent(kept),
  };
}
