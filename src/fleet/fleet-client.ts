import { Agent, request } from 'undici';
import type { Dispatcher } from 'undici';

/** How long another node's agent has to take a connection: one that does not is away, never a hang. */
const CONNECT_MS = 1_000;

/** Connections to the fleet's other agents (docs/api.md §17), kept alive between calls. */
const fleetConnections = new Agent({ connect: { timeout: CONNECT_MS }, keepAliveTimeout: 10_000 });

/**
 * A silence this long in an answer's body means the node is gone: a live stream's agent pings every 15 s
 * (docs/api.md §9), and any other answer's body comes whole once it begins.
 */
const BODY_SILENCE_MS = 45_000;

/** A call to another node's agent with the fleet's key; `signal` bounds its wait for an answer. */
export function fleetRequest(
  url: URL,
  fleetKey: string,
  { method = 'GET', headers = {}, body, signal }: { method?: string; headers?: Record<string, string>; body?: string | undefined; signal: AbortSignal },
): Promise<Dispatcher.ResponseData> {
  return request(url, {
    method: method as Dispatcher.HttpMethod,
    headers: { ...headers, authorization: `Fleet ${fleetKey}` },
    body,
    dispatcher: fleetConnections,
    signal,
    // The caller's signal bounds the wait for the answer to begin.
    headersTimeout: 0,
    bodyTimeout: BODY_SILENCE_MS,
  });
}

/**
 * An answer's body as JSON, read to at most `maxBytes`: another node's answer is input like any other, and a
 * broken or hostile node cannot make this agent hold more.
 */
export async function boundedJson(body: Dispatcher.ResponseData['body'], maxBytes: number): Promise<unknown> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > maxBytes) {
      body.destroy();
      throw new Error(`its answer passed ${maxBytes} bytes`);
    }
    chunks.push(chunk);
  }
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

/** What a failed call to another node says of why, in a few words. */
export function reasonOf(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (err instanceof Error ? err.message : String(err));
}
