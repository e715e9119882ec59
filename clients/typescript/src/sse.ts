/** One message of an event stream, as the HTML standard's parser dispatches it. */
export interface StreamMessage {
  /** The `event:` field; undefined for the default `message`. */
  readonly event: string | undefined;
  readonly data: string;
  /** The last `id:` field seen so far in the stream (the standard's last event ID). */
  readonly id: string | undefined;
}

/**
 * The most characters a stream's line, or one message's data, may hold: the agent's largest event (a failed
 * deploy's last lines, 64 KiB as JSON) many times over. A stream past it (a proxy's page, a broken server) ends
 * with an error rather than growing in memory without end.
 */
export const STREAM_LINE_MAX = 1024 * 1024;

/** A stream whose line or message passed STREAM_LINE_MAX. */
export class StreamLineTooLong extends Error {}

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
  let dataLength = 0;
  let id: string | undefined;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      buffered += done ? decoder.decode() : decoder.decode(value, { stream: true });
      // A CR at the very end may be the first half of a CRLF still to come.
      const lines = buffered.split(/\r\n|\n|\r(?!$)/);
      buffered = done ? '' : (lines.pop() ?? '');
      if (buffered.length > STREAM_LINE_MAX) throw new StreamLineTooLong(`the event stream sent a line longer than ${STREAM_LINE_MAX} characters`);
      for (const line of lines) {
        if (line.length > STREAM_LINE_MAX) throw new StreamLineTooLong(`the event stream sent a line longer than ${STREAM_LINE_MAX} characters`);
        if (line === '') {
          if (data.length > 0) yield { event, data: data.join('\n'), id };
          event = undefined;
          data = [];
          dataLength = 0;
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
        else if (field === 'data') {
          data.push(text);
          dataLength += text.length + 1;
          if (dataLength > STREAM_LINE_MAX) throw new StreamLineTooLong(`the event stream sent a message longer than ${STREAM_LINE_MAX} characters`);
        }
        else if (field === 'id' && !text.includes('\0')) id = text;
      }
      if (done) return;
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => undefined);
  }
}
