import { StringDecoder } from 'node:string_decoder';
import type { LogLine } from './driver.js';

/** The longest line a follower gets; the rest of a longer line is dropped, so that one line never fills a follower's buffer. */
export const MAX_FOLLOWED_LINE = 64 * 1024;

/** A runtime's timestamp in front of a log entry, e.g. `2026-11-23T10:00:00.123456789Z `. */
const TIMESTAMP = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) /;
/** How many bytes a timestamp and its space take at most. */
const TIMESTAMP_BYTES = 40;

/**
 * Cuts the entries of one output stream of a bot (each led by the runtime's
 * timestamp) into lines for a follower. An entry without a final newline is
 * the first part of a long line; its later parts carry timestamps of their
 * own. Bytes that are not UTF-8 become U+FFFD.
 */
export class TimestampedLines {
  private readonly decoder = new StringDecoder('utf8');
  private line = '';
  private lineAt: Date | undefined;
  private head: Buffer | undefined;
  /** For pushLines: whether the next byte begins a line. */
  private atLineStart = true;

  constructor(
    private readonly stream: LogLine['stream'],
    private readonly emit: (line: LogLine) => void,
  ) {}

  /** Bytes of the stream; `entryStart` says they begin an entry, so they begin with its timestamp. */
  push(bytes: Buffer, entryStart: boolean): void {
    let rest = bytes;
    if (entryStart) this.head = Buffer.alloc(0);
    if (this.head) {
      // Gather the timestamp, which a chunk boundary may have cut.
      const joined = Buffer.concat([this.head, rest]);
      const space = joined.indexOf(0x20);
      if (space < 0 && joined.length < TIMESTAMP_BYTES) {
        this.head = joined;
        return;
      }
      this.head = undefined;
      const match = TIMESTAMP.exec(joined.subarray(0, TIMESTAMP_BYTES).toString('latin1'));
      if (match?.[1]) {
        this.lineAt ??= new Date(match[1]);
        rest = joined.subarray(match[0].length);
      } else rest = joined;
    }
    this.text(this.decoder.write(rest));
  }

  /**
   * Bytes of a stream without frames, where every line is an entry led by
   * its timestamp (a Kubernetes log, a Docker TTY's).
   */
  pushLines(chunk: Buffer): void {
    let start = 0;
    for (let newline = chunk.indexOf(0x0a); newline >= 0; newline = chunk.indexOf(0x0a, start)) {
      this.push(chunk.subarray(start, newline + 1), this.atLineStart);
      this.atLineStart = true;
      start = newline + 1;
    }
    if (start < chunk.length) {
      this.push(chunk.subarray(start), this.atLineStart);
      this.atLineStart = false;
    }
  }

  /** Sends what is left of a line the stream ended in. */
  end(): void {
    this.text(this.decoder.end());
    if (this.line !== '') this.flush();
  }

  private text(text: string): void {
    let start = 0;
    for (let newline = text.indexOf('\n'); newline >= 0; newline = text.indexOf('\n', start)) {
      this.append(text.slice(start, newline));
      this.flush();
      start = newline + 1;
    }
    this.append(text.slice(start));
  }

  private append(piece: string): void {
    if (this.line.length < MAX_FOLLOWED_LINE) this.line += piece.slice(0, MAX_FOLLOWED_LINE - this.line.length);
  }

  private flush(): void {
    const line = this.line.endsWith('\r') ? this.line.slice(0, -1) : this.line;
    this.emit({ line, stream: this.stream, at: this.lineAt ?? new Date() });
    this.line = '';
    this.lineAt = undefined;
  }
}
