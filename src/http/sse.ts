import type { Context } from 'koa';
import type { StoredEvent } from '../history/history-store.js';

/** A comment line this often keeps idle connections (and proxies) open (docs/api.md §9). */
export const HEARTBEAT_MS = 15_000;
/**
 * Once a client's sending side has closed, it is probed at these delays and then every PROBE_MS: the
 * first write to a socket its peer closed brings back a reset, the next fails, so a client that left
 * gives its place back within a fraction of a second (one that only half-closed goes on reading).
 */
const FIRST_PROBES_MS = [0, 100, 300];
const PROBE_MS = 1_000;
/** A client that lets this much wait unread is cut off (docs/api.md §10). */
export const MAX_UNREAD_BYTES = 1024 * 1024;
/** While the streams' unread bytes in all are past their budget, a stream with more than this unread is cut. */
const BEHIND_BYTES = 64 * 1024;

/** One Server-Sent Event. */
export interface SseEvent {
  readonly id?: string | undefined;
  readonly event: string;
  readonly data: string;
}

/** What every stream's unread bytes add up to, and their bound (StreamLimits). */
export interface UnreadBudget {
  unread: number;
  readonly maxUnreadInAll: number;
}

/** A kept event as sent: its cursor is its id. */
export const sseOf = (event: StoredEvent): SseEvent => ({ id: String(event.seq), event: event.type, data: event.data });

/**
 * A text/event-stream answer written straight to the socket, past koa's body
 * handling (opened through StreamLimits). Writes never wait: what the client
 * does not read piles up in the socket's buffer, and once that passes
 * MAX_UNREAD_BYTES, or every stream's together pass their budget while this
 * one is behind, the client is cut off; so a slow reader costs a bounded amount
 * of memory and no one else's time.
 */
export class SseStream {
  private readonly controller = new AbortController();
  private heartbeat: NodeJS.Timeout;
  private probes: NodeJS.Timeout[] = [];
  /** This stream's unread bytes as last added to the budget. */
  private counted = 0;

  constructor(
    private readonly ctx: Context,
    private readonly budget: UnreadBudget,
    private readonly maxUnreadBytes = MAX_UNREAD_BYTES,
  ) {
    ctx.respond = false;
    ctx.status = 200;
    const res = ctx.res;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      'x-request-id': String(ctx.state.requestId ?? ''),
    });
    res.flushHeaders();
    this.heartbeat = setInterval(() => this.write(': ping\n\n'), HEARTBEAT_MS).unref();
    const end = (): void => this.close();
    res.on('close', end);
    res.on('error', end);
    res.on('drain', () => this.recount());
    // The server keeps half-closed sockets open (busybox nc half-closes once its request is out), so a
    // client that left is noticed only when a write fails: once its side has closed, probe.
    ctx.req.socket.once('end', () => {
      clearInterval(this.heartbeat);
      this.probes = FIRST_PROBES_MS.map((ms) => setTimeout(() => this.write(': ping\n\n'), ms).unref());
      this.heartbeat = setInterval(() => this.write(': ping\n\n'), PROBE_MS).unref();
    });
    this.write(': stream open\n\n');
  }

  /** Aborts when the stream ends, whoever ends it. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get closed(): boolean {
    return this.controller.signal.aborted;
  }

  /** Sends one event; false once the stream is closed. */
  send(event: SseEvent): boolean {
    const id = event.id === undefined ? '' : `id: ${event.id}\n`;
    return this.write(`${id}event: ${event.event}\ndata: ${event.data}\n\n`);
  }

  /** Resolves when the stream ends. */
  ended(): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => this.signal.addEventListener('abort', () => resolve(), { once: true }));
  }

  close(): void {
    if (this.closed) return;
    this.stop();
    if (!this.ctx.res.writableEnded) this.ctx.res.end();
  }

  private stop(): void {
    clearInterval(this.heartbeat);
    for (const probe of this.probes) clearTimeout(probe);
    this.budget.unread -= this.counted;
    this.counted = 0;
    this.controller.abort();
  }

  private recount(): void {
    if (this.closed) return;
    const unread = this.ctx.res.writableLength;
    this.budget.unread += unread - this.counted;
    this.counted = unread;
  }

  private write(text: string): boolean {
    if (this.closed) return false;
    const res = this.ctx.res;
    this.recount();
    const behind = this.counted > this.maxUnreadBytes || (this.budget.unread > this.budget.maxUnreadInAll && this.counted > BEHIND_BYTES);
    if (behind) {
      // The client does not read: drop it rather than hold more for it.
      this.stop();
      res.destroy();
      return false;
    }
    res.write(text);
    this.recount();
    return true;
  }
}
