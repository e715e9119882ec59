/**
 * Calls `onValue` with each value of a newline-delimited JSON stream, as the
 * engine sends events and stats. (docker-modem's followProgress parses the
 * same format but keeps every value it saw, which a stream open for days must not.)
 * A line that is not JSON is skipped rather than thrown out of an event handler.
 */
export function eachJsonLine<T>(stream: NodeJS.ReadableStream, onValue: (value: T) => void): void {
  let pending = '';
  stream.on('data', (chunk: Buffer) => {
    pending += chunk.toString('utf8');
    let end: number;
    while ((end = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, end).trim();
      pending = pending.slice(end + 1);
      if (!line) continue;
      let value: T;
      try {
        value = JSON.parse(line) as T;
      } catch {
        continue;
      }
      onValue(value);
    }
  });
}
