import { StringDecoder } from 'node:string_decoder';

/** The longest line kept while waiting for its end; events and stats lines are a few KiB. */
const MAX_LINE = 1024 * 1024;

/**
 * Calls `onValue` with each value of a newline-delimited JSON stream, as the
 * engine sends events and stats. (docker-modem's followProgress parses the
 * same format but keeps every value it saw, which a stream open for days must not.)
 * Nothing that arrives can throw out of the stream's handler: a line that is
 * not JSON, or too long, is skipped, and what `onValue` throws goes to `onError`.
 */
export function eachJsonLine<T>(
  stream: NodeJS.ReadableStream,
  onValue: (value: T) => void,
  onError: (err: unknown) => void,
): void {
  const decoder = new StringDecoder('utf8');
  let pending = '';
  stream.on('data', (chunk: Buffer) => {
    pending += decoder.write(chunk);
    let start = 0;
    for (let end = pending.indexOf('\n'); end >= 0; end = pending.indexOf('\n', start)) {
      const line = pending.slice(start, end).trim();
      start = end + 1;
      if (line) deliver(line);
    }
    pending = pending.slice(start);
    if (pending.length > MAX_LINE) {
      pending = '';
      onError(new Error(`a line of the engine's stream was longer than ${MAX_LINE} characters; skipped`));
    }
  });

  function deliver(line: string): void {
    let value: T;
    try {
      value = JSON.parse(line) as T;
    } catch {
      return;
    }
    try {
      onValue(value);
    } catch (err) {
      onError(err);
    }
  }
}
