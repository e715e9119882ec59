import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { isHostItself } from '../loopback.js';
import { plainAddress } from './caller.js';

/** What one caller, and all callers together, may hold of the agent's connections (docs/api.md §2). */
export interface ConnectionLimits {
  /** Connections open at once from one address; past it a new one is closed as it arrives. */
  readonly perAddress: number;
  /** Connections open at once in all (Node's maxConnections). */
  readonly total: number;
  /** A request's headers must have arrived within this, ... */
  readonly headersMs: number;
  /** ... and the whole request (a body is at most 16 KiB) within this. */
  readonly requestMs: number;
}

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = { perAddress: 64, total: 16_384, headersMs: 10_000, requestMs: 15_000 };

/**
 * Settings of the HTTP server that bound connections: how long a request may
 * take to arrive, checked every second (Node checks every 30 s by default, so
 * that a half-sent request held a connection up to 40 s).
 */
export function serverTimeouts(limits: ConnectionLimits) {
  return { headersTimeout: limits.headersMs, requestTimeout: limits.requestMs, connectionsCheckingInterval: 1_000 };
}

/** What a connection counted against its address carries: the way to stop counting it. */
const UNCOUNT = Symbol('uncount');

/**
 * Bounds the connections `server` holds: at most `perAddress` from any one
 * address (one bot holding thousands of idle connections costs the agent 64),
 * at most `total` in all. The host itself (127.0.0.1, ::1) is not counted per
 * address: every caller of a platform on the host shares it; nor is a
 * connection once a request on it came from the platform (platformConnection).
 */
export function limitConnections(server: Server, limits: ConnectionLimits): void {
  server.maxConnections = limits.total;
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket & { [UNCOUNT]?: () => void }) => {
    const address = plainAddress(socket.remoteAddress ?? '');
    if (isHostItself(address)) return;
    const count = (open.get(address) ?? 0) + 1;
    if (count > limits.perAddress) {
      socket.destroy();
      return;
    }
    open.set(address, count);
    let counted = true;
    socket[UNCOUNT] = () => {
      if (!counted) return;
      counted = false;
      const left = (open.get(address) ?? 1) - 1;
      if (left === 0) open.delete(address);
      else open.set(address, left);
    };
    socket.once('close', socket[UNCOUNT]);
  });
}

/**
 * A request on `socket` came from the platform (its token): the connection no
 * longer counts against its address, so that a platform holding many streams
 * from one address is not taken for a bot holding connections.
 */
export function platformConnection(socket: Socket): void {
  (socket as Socket & { [UNCOUNT]?: () => void })[UNCOUNT]?.();
}
