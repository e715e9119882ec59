import type { Context } from 'koa';
import type { StoredEvent } from '../history/history-store.js';

/** A comment line this often keeps idle connections (and proxies) open (CONTRACT.md §9). */
export const HEARTBEAT_MS = 15_000;
/** How often a client whose sending side has closed is checked for being gone. */
const PROBE_MS = 1_000;
/** A client that lets this much wait unread is cut off (CONTRACT.md §10). */
export const MAX_UNREAD_BYTES = 1024 * 1024;

/** One Server-Sent Event. */
export interface SseEvent {
  readonly id?: string | undefined;
  readonly event: string;
  readonly data: string;
}

/** A kept event as sent: its cursor is its id. */
export const sseOf = (event: StoredEvent): SseEvent => ({ id: String(event.seq), event: event.type, data: event.data });

/**
 * A text/event-stream answer written straight to the socket, past koa's body
 * handling. Writes never wait: what the client does not read piles up in the
 * socket's buffer, and once that passes MAX_UNREAD_BYTES the client is cut
 * off, so a slow reader costs at most that much memory and no one else's time.
 */
export class SseStream {
  private readonly controller = new AbortController();
  private heartbeat: NodeJS.Timeout;

  constructor(
    private readonly ctx: Context,
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
    res.write(': stream open\n\n');
    this.heartbeat = setInterval(() => this.write(': ping\n\n'), HEARTBEAT_MS).unref();
    const end = (): void => this.close();
    res.on('close', end);
    res.on('error', end);
    ctx.req.on('close', end);
    // The server keeps half-closed sockets open (busybox nc half-closes once its request is out), so a
    // client that left is noticed only when a write fails: once its side has closed, probe every second.
    ctx.req.socket.once('end', () => {
      clearInterval(this.heartbeat);
      this.heartbeat = setInterval(() => this.write(': ping\n\n'), PROBE_MS).unref();
    });
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
    clearInterval(this.heartbeat);
    this.controller.abort();
    if (!this.ctx.res.writableEnded) this.ctx.res.end();
  }

  private write(text: string): boolean {
    if (this.closed) return false;
    const res = this.ctx.res;
    if (res.writableLength > this.maxUnreadBytes) {
      // The client does not read: drop it rather than hold more for it.
      clearInterval(this.heartbeat);
      this.controller.abort();
      res.destroy();
      return false;
    }
    res.write(text);
    return true;
  }
}
