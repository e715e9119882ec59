/** One message of an event stream, as the HTML standard's parser dispatches it. */
export interface StreamMessage {
  /** The `event:` field; undefined for the default `message`. */
  readonly event: string | undefined;
  readonly data: string;
  /** The last `id:` field seen so far in the stream (the standard's last event ID). */
  readonly id: string | undefined;
}

/**
 * The messages of a `text/event-stream` body, as the HTML standard parses them (lines end in CRLF, LF
 * or CR; `data:` lines join with LF; a blank line dispatches; a line starting with `:` is a comment,
 * handed to `onComment`). Only the platform's web streams and TextDecoder: no dependency.
 */
export async function* streamMessages(body: ReadableStream<Uint8Array>, onComment?: () => void): AsyncGenerator<StreamMessage> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  let event: string | undefined;
  let data: string[] = [];
  let id: string | undefined;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      buffered += done ? decoder.decode() : decoder.decode(value, { stream: true });
      // A CR at the very end may be the first half of a CRLF still to come.
      const lines = buffered.split(/\r\n|\n|\r(?!$)/);
      buffered = done ? '' : (lines.pop() ?? '');
      for (const line of lines) {
        if (line === '') {
          if (data.length > 0) yield { event, data: data.join('\n'), id };
          event = undefined;
          data = [];
          continue;
        }
        if (line.startsWith(':')) {
          onComment?.();
          continue;
        }
        const colon = line.indexOf(':');
        const field = colon === -1 ? line : line.slice(0, colon);
        const text = colon === -1 ? '' : line.slice(line[colon + 1] === ' ' ? colon + 2 : colon + 1);
        if (field === 'event') event = text;
        else if (field === 'data') data.push(text);
        else if (field === 'id' && !text.includes('\0')) id = text;
      }
      if (done) return;
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => undefined);
  }
}
