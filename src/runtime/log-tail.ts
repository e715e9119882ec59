import { fitJson } from '../json-text.js';

/** The most log text one answer carries (docs/api.md §2), measured as it is written inside the JSON answer. */
export const MAX_LOG_BYTES = 4 * 1024 * 1024;

const NEWLINE = 0x0a;

/**
 * The newest bytes of a stream, holding at most `keep` of them (plus one
 * chunk while it is pushed): a bot's output, however large, costs the agent
 * no more than that. `cut` says whether older bytes were dropped.
 */
export class TailBuffer {
  private chunks: Buffer[] = [];
  private size = 0;
  cut = false;

  constructor(private readonly keep: number = MAX_LOG_BYTES + 1) {}

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.chunks.length > 1 && this.size - (this.chunks[0]?.length ?? 0) >= this.keep) {
      this.size -= this.chunks.shift()?.length ?? 0;
      this.cut = true;
    }
  }

  /** The bytes kept, at most `keep`. */
  bytes(): Buffer {
    const all = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks, this.size);
    if (all.length <= this.keep) return all;
    this.cut = true;
    return all.subarray(all.length - this.keep);
  }
}

/** How many newlines `bytes` holds. */
export function countNewlines(bytes: Buffer): number {
  let count = 0;
  for (let at = bytes.indexOf(NEWLINE); at >= 0; at = bytes.indexOf(NEWLINE, at + 1)) count += 1;
  return count;
}

/** How many lines `bytes` holds: each newline ends one, and text after the last one is one more. */
export function countLines(bytes: Buffer): number {
  const count = countNewlines(bytes);
  return bytes.length > 0 && bytes[bytes.length - 1] !== NEWLINE ? count + 1 : count;
}

/** Where the last `lines` lines of `bytes` begin, or 0 when it holds no more than that. */
function startOfLastLines(bytes: Buffer, lines: number): number {
  // A final newline ends the last line; it does not begin another.
  let before = bytes.length - (bytes[bytes.length - 1] === NEWLINE ? 2 : 1);
  for (let found = 0; before >= 0; ) {
    const newline = bytes.lastIndexOf(NEWLINE, before);
    if (newline < 0) return 0;
    found += 1;
    if (found === lines) return newline + 1;
    before = newline - 1;
  }
  return 0;
}

/** Moves `at` past UTF-8 continuation bytes, so that a cut never splits a character. */
function characterStart(bytes: Buffer, at: number): number {
  let start = at;
  while (start < bytes.length && ((bytes[start] ?? 0) & 0xc0) === 0x80) start += 1;
  return start;
}

/**
 * The answer to a logs read (docs/api.md §2): the last `lines` lines of
 * `bytes`, taking at most `maxBytes` once written in the JSON answer (newest
 * whole lines kept; a single longer line keeps its end), bytes that are not
 * UTF-8 as U+FFFD.
 * `cut`: `bytes` is the end of a longer text, so its first line may be partial.
 * `tty`: a terminal's CRLF line ends become LF.
 */
export function lastLines(
  bytes: Buffer,
  lines: number,
  { cut = false, tty = false, maxBytes = MAX_LOG_BYTES }: { cut?: boolean; tty?: boolean; maxBytes?: number } = {},
): string {
  let start = startOfLastLines(bytes, lines);
  if (start === 0 && cut) {
    // The first line began before what was kept: drop it, unless it is all there is.
    const newline = bytes.indexOf(NEWLINE);
    start = newline >= 0 && newline + 1 < bytes.length ? newline + 1 : characterStart(bytes, 0);
  }
  let text = bytes.subarray(start).toString('utf8');
  if (tty) text = text.replace(/\r\n/g, '\n');
  // Measured as answered: U+FFFD takes three bytes where a stray byte took one, a control byte six.
  return fitJson(text, maxBytes);
}
