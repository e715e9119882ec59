import { request } from 'node:http';
import type { IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One Server-Sent Event as a client sees it. */
export interface ReceivedEvent {
  id: string | undefined;
  event: string;
  data: Record<string, unknown>;
}

/** An open event stream, or the envelope answered instead of one. */
export interface EventStream {
  status: number;
  headers: IncomingMessage['headers'];
  /** The JSON body when the answer was not a stream. */
  body: Record<string, unknown> | undefined;
  /** Every event so far, in order. */
  events: ReceivedEvent[];
  /** Comment lines so far (`: ping`). */
  comments: string[];
  /** Resolves with the first event (from the start) that `match` accepts; rejects after `ms`. */
  next(match: (event: ReceivedEvent) => boolean, ms?: number): Promise<ReceivedEvent>;
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  close(): void;
  response: IncomingMessage;
}

/** Opens `path` on the test's own server as an event stream (from a chosen 127.x address). */
export function openStream(
  target: Server | { host?: string; port: number },
  path: string,
  options: { from?: string; headers?: Record<string, string> } = {},
): Promise<EventStream> {
  const port = 'address' in target ? (target.address() as AddressInfo).port : target.port;
  const host = 'address' in target ? '127.0.0.1' : (target.host ?? '127.0.0.1');
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path, headers: options.headers, localAddress: options.from }, (res) => {
      const events: ReceivedEvent[] = [];
      const comments: string[] = [];
      const waiters = new Set<() => void>();
      let pending = '';
      const ended = new Promise<void>((done) => {
        res.on('end', done);
        res.on('close', done);
        res.on('error', () => done());
      });
      const stream: EventStream = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        body: undefined,
        events,
        comments,
        ended,
        response: res,
        close: () => {
          res.destroy();
          req.destroy();
        },
        next(match, ms = 20_000) {
          return new Promise((found, fail) => {
            const check = (): boolean => {
              const event = events.find(match);
              if (!event) return false;
              waiters.delete(waiter);
              clearTimeout(timer);
              found(event);
              return true;
            };
            const waiter = (): void => void check();
            const timer = setTimeout(() => {
              waiters.delete(waiter);
              fail(new Error(`no matching event within ${ms} ms; got ${JSON.stringify(events.map((e) => e.event))}`));
            }, ms);
            waiters.add(waiter);
            check();
          });
        },
      };
      if (!String(res.headers['content-type']).startsWith('text/event-stream')) {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          // Node's own answers (a 408, a 400 of its parser) have no body: the status says it all.
          const text = Buffer.concat(chunks).toString('utf8');
          stream.body = text === '' ? undefined : (JSON.parse(text) as Record<string, unknown>);
          resolve(stream);
        });
        return;
      }
      res.setEncoding('utf8');
      res.on('data', (text: string) => {
        pending += text;
        for (let end = pending.indexOf('\n\n'); end >= 0; end = pending.indexOf('\n\n')) {
          const block = pending.slice(0, end);
          pending = pending.slice(end + 2);
          const fields = new Map<string, string>();
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comments.push(line.slice(1).trim());
            else {
              const colon = line.indexOf(':');
              fields.set(line.slice(0, colon), line.slice(colon + 1).replace(/^ /, ''));
            }
          }
          if (fields.has('event')) {
            events.push({ id: fields.get('id'), event: fields.get('event') ?? '', data: JSON.parse(fields.get('data') ?? '{}') as Record<string, unknown> });
          }
        }
        for (const waiter of waiters) waiter();
      });
      resolve(stream);
    });
    req.on('error', reject);
    req.end();
  });
}
