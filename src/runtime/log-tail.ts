/** The most log text one answer carries (CONTRACT.md §2), measured as it is written inside the JSON answer. */
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

/** The most bytes one UTF-16 code unit can take inside a JSON string (`\u0001`). */
const MAX_JSON_BYTES_PER_UNIT = 6;

/** Bytes the code unit at `at` (with its pair, when it begins one) takes inside a JSON string as JSON.stringify writes it, in UTF-8. */
function jsonUnitBytes(code: number): number {
  if (code < 0x20) return code === 0x08 || code === 0x09 || code === 0x0a || code === 0x0c || code === 0x0d ? 2 : 6;
  if (code === 0x22 || code === 0x5c) return 2;
  if (code < 0x80) return 1;
  if (code < 0x800) return 2;
  return 3;
}

const isHighSurrogate = (code: number): boolean => code >= 0xd800 && code <= 0xdbff;
const isLowSurrogate = (code: number): boolean => code >= 0xdc00 && code <= 0xdfff;

/**
 * How many bytes `text` takes once written inside a JSON string (UTF-8, as
 * JSON.stringify escapes it): a control character takes six (`\u0001`), so a
 * bound on text is not a bound on the answer that carries it.
 */
export function jsonBytes(text: string): number {
  let bytes = 0;
  for (let at = 0; at < text.length; at += 1) {
    const code = text.charCodeAt(at);
    if (isHighSurrogate(code) && isLowSurrogate(text.charCodeAt(at + 1))) {
      bytes += 4;
      at += 1;
    } else bytes += isHighSurrogate(code) || isLowSurrogate(code) ? 6 : jsonUnitBytes(code);
  }
  return bytes;
}

/**
 * The newest whole lines of `text` that take at most `maxBytes` inside a JSON
 * string; when the newest line alone takes more, its end.
 */
export function fitJson(text: string, maxBytes: number): string {
  if (text.length * MAX_JSON_BYTES_PER_UNIT <= maxBytes || jsonBytes(text) <= maxBytes) return text;
  let start = text.length;
  for (let budget = maxBytes; start > 0; ) {
    const code = text.charCodeAt(start - 1);
    const pair = isLowSurrogate(code) && isHighSurrogate(text.charCodeAt(start - 2));
    const cost = pair ? 4 : isHighSurrogate(code) || isLowSurrogate(code) ? 6 : jsonUnitBytes(code);
    if (cost > budget) break;
    budget -= cost;
    start -= pair ? 2 : 1;
  }
  if (start === 0 || text.charCodeAt(start - 1) === 0x0a) return text.slice(start);
  const newline = text.indexOf('\n', start);
  return newline >= 0 && newline + 1 < text.length ? text.slice(newline + 1) : text.slice(start);
}

/**
 * The answer to a logs read (CONTRACT.md §2): the last `lines` lines of
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
