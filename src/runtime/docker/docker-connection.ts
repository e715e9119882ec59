import http from 'node:http';
import https from 'node:https';
import { inspect } from 'node:util';
import Docker from 'dockerode';
import type { DockerOptions } from 'dockerode';
import type DockerModem from 'docker-modem';

/**
 * dockerode options for a DOCKER_HOST value, read as the docker CLI reads it:
 * `unix:///path` is a socket, `tcp://host:port` plain HTTP, `https://` TLS.
 */
export function dockerConnection(dockerHost: string): DockerOptions {
  const url = new URL(dockerHost);
  if (url.protocol === 'unix:') return { socketPath: url.pathname };
  const secure = url.protocol === 'https:';
  return {
    protocol: secure ? 'https' : 'http',
    host: url.hostname,
    port: Number(url.port) || (secure ? 2376 : 2375),
  };
}

/** At most this many quick calls reach the engine at once; more wait their turn, within their own deadline. */
export const QUICK_CONNECTIONS = 32;
/** Lasting calls kept open afterwards for the next one. */
const LASTING_IDLE_CONNECTIONS = 4;
/** An idle connection is closed after this long (the engine never closes one itself). */
const IDLE_MS = 30_000;

/**
 * The agent's two clients of one engine, each over connections kept open
 * between calls (docs/performance.md, "Connections to the engine"):
 * - `docker` for quick calls (inspections, lists, log reads, pings, one-shot
 *   stats), over at most QUICK_CONNECTIONS connections, all kept for the next call;
 * - `lasting` for calls that hold their connection for as long as they last
 *   (event and stats streams, followed logs, and the stops, starts, restarts,
 *   creations and removals that wait for a container): they never take a quick
 *   call's connection nor wait behind quick calls, and how many run is bounded
 *   where they are made (one event stream, one stats stream per bot read, the
 *   stream limits, one operation per bot at a time).
 * A connection the engine closes (it restarted) leaves the pool as it closes.
 */
export interface EngineClients {
  readonly docker: Docker;
  readonly lasting: Docker;
}

/**
 * An agent that describes itself in a word. docker-modem formats every request's options with
 * `util.inspect(..., { showHidden: true, depth: null })`, debugging on or not: an agent among them
 * would be walked whole, every socket and parser of its pools, on every call (it made a test file
 * of the engine's three times slower).
 */
function terse<T extends http.Agent>(agent: T): T {
  Object.defineProperty(agent, inspect.custom, { value: () => `[${agent.constructor.name}]` });
  return agent;
}

export function engineClients(dockerHost: string): EngineClients {
  const connection = dockerConnection(dockerHost);
  const Agent = connection.protocol === 'https' ? https.Agent : http.Agent;
  const client = (agent: http.Agent): Docker => new Docker({ ...connection, agent: terse(agent) } satisfies DockerModem.ConstructorOptions as DockerOptions);
  return {
    docker: client(new Agent({ keepAlive: true, maxSockets: QUICK_CONNECTIONS, maxFreeSockets: QUICK_CONNECTIONS, timeout: IDLE_MS, scheduling: 'lifo' })),
    lasting: client(new Agent({ keepAlive: true, maxFreeSockets: LASTING_IDLE_CONNECTIONS, timeout: IDLE_MS, scheduling: 'lifo' })),
  };
}
