import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { openApiMismatch } from './openapi-check.js';

/** What a test sees of a response. */
export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The parsed JSON body; undefined when the body was not JSON, or was an event stream (not read). */
  body: Record<string, unknown> | undefined;
  text: string;
}

export interface CallOptions {
  method?: string;
  headers?: Record<string, string>;
  /** An object is sent as JSON; a string as it is. */
  body?: unknown;
  /** Local address to call from (any 127.x address reaches a server on 127.0.0.1). */
  from?: string;
  signal?: AbortSignal;
}

/** An HTTP call to a server of the test's own, from a chosen local address. */
export function call(server: Server, path: string, options: CallOptions = {}): Promise<Reply> {
  const { port } = server.address() as AddressInfo;
  const payload =
    options.body === undefined ? undefined : typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
  const headers: Record<string, string> = { ...options.headers };
  if (payload !== undefined) {
    headers['content-type'] ??= 'application/json';
    headers['content-length'] = String(Buffer.byteLength(payload));
  }
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: options.method ?? (payload === undefined ? 'GET' : 'POST'),
        headers,
        localAddress: options.from,
        signal: options.signal,
      },
      (res) => {
        const method = options.method ?? (payload === undefined ? 'GET' : 'POST');
        const status = res.statusCode ?? 0;
        // A live stream has no end to wait for: it is taken as answered once its headers are (openStream reads one).
        if (String(res.headers['content-type']).startsWith('text/event-stream')) {
          res.destroy();
          const mismatch = method === 'HEAD' ? undefined : openApiMismatch(method, path, status, undefined, true);
          if (mismatch) reject(new Error(`answer does not fit /openapi.json: ${mismatch}`));
          else resolve({ status, headers: res.headers, body: undefined, text: '' });
          return;
        }
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: Record<string, unknown> | undefined;
          try {
            body = JSON.parse(text) as Record<string, unknown>;
          } catch {
            body = undefined;
          }
          // Every answer a test sees must be what /openapi.json promises.
          const mismatch = method === 'HEAD' ? undefined : openApiMismatch(method, path, status, body);
          if (mismatch) reject(new Error(`answer does not fit /openapi.json: ${mismatch}`));
          else resolve({ status, headers: res.headers, body, text });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}
