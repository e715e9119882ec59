/** What a bot's raw HTTP/1.0 call saw: the status, the parsed JSON body (if JSON), and all it read. */
export interface RawReply {
  status: number;
  body: Record<string, unknown> | undefined;
  raw: string;
}

/** An HTTP/1.0 request as bytes, for a client as plain as busybox nc inside a bot. */
export function rawRequest(request: { method: string; path: string; headers?: Record<string, string>; body?: unknown }): string {
  const payload = request.body === undefined ? '' : JSON.stringify(request.body);
  const headers = {
    Host: 'agent',
    Connection: 'close',
    'Content-Type': 'application/json',
    'Content-Length': String(Buffer.byteLength(payload)),
    ...request.headers,
  };
  const head = [`${request.method} ${request.path} HTTP/1.0`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
  return `${head.join('\r\n')}\r\n\r\n${payload}`;
}

/** The status and JSON body of a raw HTTP reply. */
export function parseRawReply(raw: string): RawReply {
  const status = Number(/^HTTP\/1\.\d (\d{3})/.exec(raw)?.[1] ?? 0);
  const text = raw.slice(raw.indexOf('\r\n\r\n') + 4);
  let body: Record<string, unknown> | undefined;
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    body = undefined;
  }
  return { status, body, raw };
}

/** The shell script a bot runs to send $REQUEST to $AGENT_HOST:$AGENT_PORT with busybox nc. */
export const NC_SCRIPT = 'printf "%s" "$REQUEST" | nc -w 10 "$AGENT_HOST" "$AGENT_PORT"';
