import { StringDecoder } from 'node:string_decoder';
import { jsonBytes } from '../json-text.js';

/** How a command run in a bot's container ended (docs/api.md §18). */
export interface CommandResult {
  /** Its exit code; null when it is not known (killed where the runtime tells none). */
  readonly exitCode: number | null;
  /** Its standard output and error, in the order they came, at most the bound asked for (measured as answered in JSON). */
  readonly output: string;
  /** More was written than the bound: the output is its beginning. */
  readonly truncated: boolean;
  /** It outlasted its time-out and was killed (or, where it could not be, abandoned: `message` says so). */
  readonly timedOut: boolean;
  readonly message: string | null;
}

/** What a command may take: a time-out, and the most output kept. */
export interface CommandBounds {
  readonly timeoutMs: number;
  readonly maxBytes: number;
}

/**
 * A command's output, kept up to `maxBytes` as it takes inside a JSON string: the first bytes are kept, and
 * the rest only counted, so a command that writes without end costs no more memory than its bound.
 */
export class BoundedOutput {
  private readonly decoder = new StringDecoder('utf8');
  private text = '';
  private used = 0;
  truncated = false;

  constructor(private readonly maxBytes: number) {}

  write(chunk: Buffer): void {
    if (this.truncated) return;
    this.add(this.decoder.write(chunk));
  }

  end(): string {
    if (!this.truncated) this.add(this.decoder.end());
    return this.text;
  }

  private add(piece: string): void {
    const bytes = jsonBytes(piece);
    if (this.used + bytes <= this.maxBytes) {
      this.text += piece;
      this.used += bytes;
      return;
    }
    // The part of `piece` that still fits, a code point at a time.
    let kept = 0;
    for (const char of piece) {
      const cost = jsonBytes(char);
      if (this.used + cost > this.maxBytes) break;
      this.used += cost;
      kept += char.length;
    }
    this.text += piece.slice(0, kept);
    this.truncated = true;
  }
}
