import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import onFinished from 'on-finished';
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
  /** Connections open at once through a proxy's hop, all bots behind it together; each bot holds at most `perAddress`. */
  readonly perHop: number;
  /** Whether an address is a proxy's hop (hops.ts); none: no address is. */
  readonly isHop?: (address: string) => boolean;
}

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = { perAddress: 64, total: 16_384, headersMs: 10_000, requestMs: 15_000, perHop: 1_024 };

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
/** What a connection through a hop carries: the way to count it against the bot a request on it named, ... */
const NAME = Symbol('name');
/** ... and the way to say a request on it is under way (it is then not closed for a newcomer). */
const BUSY = Symbol('busy');

type Counted = Socket & { [UNCOUNT]?: () => void; [NAME]?: (botId: string) => boolean; [BUSY]?: (busy: boolean) => void };

/**
 * Bounds the connections `server` holds: at most `perAddress` from any one
 * address (one bot holding thousands of idle connections costs the agent 64),
 * at most `total` in all. The host itself (127.0.0.1, ::1) is not counted per
 * address: every caller of a platform on the host shares it; nor is a
 * connection once a request on it came from the platform (platformConnection).
 *
 * Through a proxy's hop every bot shares one address: there the hop holds at
 * most `perHop`, of which connections no request has named yet hold at most
 * half (a newcomer takes the place of the oldest idle one), and each bot at
 * most `perAddress` once its requests name it (namedConnection): no one bot
 * fills the hop, and unnamed traffic never keeps a bot out.
 */
export function limitConnections(server: Server, limits: ConnectionLimits): void {
  server.maxConnections = limits.total;
  const open = new Map<string, number>();
  const hops = new HopConnections(limits);
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const busy = (req.socket as Counted)[BUSY];
    if (busy === undefined) return;
    busy(true);
    onFinished(res, () => busy(false));
  });
  server.on('connection', (socket: Counted) => {
    const address = plainAddress(socket.remoteAddress ?? '');
    if (limits.isHop?.(address)) {
      hops.take(socket);
      return;
    }
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
  (socket as Counted)[UNCOUNT]?.();
}

/**
 * A request on `socket` named the bot `botId`: a connection through a hop counts against that bot from now
 * on (the first bot named keeps it). False when the bot holds its share of the hop already.
 */
export function namedConnection(socket: Socket, botId: string): boolean {
  return (socket as Counted)[NAME]?.(botId) ?? true;
}

/**
 * The connections through proxies' hops: all of them, those no request named yet, and each bot's.
 * Unnamed connections never take a named caller's place: when they hold their half, the oldest of them
 * with no request under way gives its place to the new one, so idle or refused traffic through a hop can
 * delay a bot's connection by nothing (docs/api.md §2).
 */
class HopConnections {
  private open = 0;
  /** Connections no request named yet, oldest first, each with whether a request on it is under way. */
  private readonly unnamed = new Map<Counted, { busy: boolean }>();
  private readonly byBot = new Map<string, number>();

  constructor(private readonly limits: ConnectionLimits) {}

  take(socket: Counted): void {
    const full = this.open >= this.limits.perHop || this.unnamed.size >= this.limits.perHop / 2;
    if (full && !this.evictIdleUnnamed()) {
      socket.destroy();
      return;
    }
    this.open += 1;
    const state = { busy: false };
    this.unnamed.set(socket, state);
    let bot: string | undefined;
    let counted = true;
    socket[BUSY] = (busy) => (state.busy = busy);
    socket[NAME] = (botId) => {
      if (bot !== undefined) return true;
      const held = this.byBot.get(botId) ?? 0;
      if (held >= this.limits.perAddress) return false;
      bot = botId;
      this.byBot.set(botId, held + 1);
      this.unnamed.delete(socket);
      return true;
    };
    socket[UNCOUNT] = () => {
      if (!counted) return;
      counted = false;
      this.open -= 1;
      if (bot === undefined) this.unnamed.delete(socket);
      else {
        const left = (this.byBot.get(bot) ?? 1) - 1;
        if (left === 0) this.byBot.delete(bot);
        else this.byBot.set(bot, left);
      }
    };
    socket.once('close', socket[UNCOUNT]);
  }

  /** Closes the oldest unnamed connection with no request under way; false when there is none. */
  private evictIdleUnnamed(): boolean {
    for (const [socket, state] of this.unnamed) {
      if (state.busy) continue;
      socket[UNCOUNT]?.();
      socket.destroy();
      return true;
    }
    return false;
  }
}
