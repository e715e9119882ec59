import { closeSync, existsSync, fstatSync, openSync, readSync } from 'node:fs';
import { countNewlines, lastLines, MAX_LOG_BYTES } from '../log-tail.js';

/** How much of the file one read takes, from its end backwards. */
const BLOCK_BYTES = 64 * 1024;
/**
 * The most of the file a read goes through before it leaves the read to the engine: a line of control
 * bytes takes six times its size in JSON, and each entry adds about 70 bytes of its own.
 */
const MAX_FILE_BYTES = 8 * MAX_LOG_BYTES;
const NEWLINE = 0x0a;

/**
 * The last `lines` lines of a container's log, read straight from the engine's json-file log
 * (`LogPath`, docs/docker.md) instead of through the engine, which decodes and sends each entry as a
 * frame of its own: the same text, a fraction of the time. Undefined where the file cannot answer
 * alone and the engine must: no json-file log, a file the agent may not read, a log rotated before
 * the lines wanted, or more of the file than MAX_FILE_BYTES to go through.
 *
 * The engine writes one JSON object a line (`{"log":"...","stream":"stdout","time":"..."}`); a
 * line longer than 16 KiB is several entries, of which only the last ends in a newline, so the
 * entries' text laid end to end is what the engine's logs call sends. A last line without its
 * newline is one the engine is writing: it is left out.
 *
 * Read synchronously: the file was just written, so in the page cache, and each of the four calls an
 * asynchronous read makes waits for a thread of the pool: 0.55 ms a read here, against some 10 µs. A read
 * that needs more than one block lets other work run between blocks: a bot's 4 MiB answer holds no one else.
 */
export async function readLogFile(logPath: string, tty: boolean, lines: number): Promise<string | undefined> {
  if (!logPath.endsWith('-json.log')) return undefined;
  let file: number;
  try {
    file = openSync(logPath, 'r');
  } catch {
    return undefined;
  }
  try {
    const newest = await newestEntries(file, lines);
    if (newest === undefined) return undefined;
    const { texts, newlines, cut, reachedStart } = newest;
    // The lines before these are in a rotated file: the engine reads those.
    if (reachedStart && !cut && newlines < lines && rotated(logPath)) return undefined;
    texts.reverse();
    return lastLines(Buffer.concat(texts), lines, { cut, tty });
  } finally {
    closeSync(file);
  }
}

/**
 * The text of the file's newest entries, newest first: enough of them for `lines` whole lines
 * (one newline more than that), or past what an answer holds (`cut`), or all of them (`reachedStart`).
 */
async function newestEntries(file: number, lines: number): Promise<{ texts: Buffer[]; newlines: number; cut: boolean; reachedStart: boolean } | undefined> {
  const { size } = fstatSync(file);
  const texts: Buffer[] = [];
  let newlines = 0;
  let textBytes = 0;
  // The bytes after the last newline of the block before (in the file): the rest of an entry that begins there.
  let carry = Buffer.alloc(0);
  // Until a newline is found, the bytes read are an entry the engine is still writing: left out.
  let sawNewline = false;
  for (let end = size; end > 0; ) {
    if (size - end >= MAX_FILE_BYTES) return undefined;
    if (end < size) await new Promise(setImmediate);
    const start = Math.max(0, end - BLOCK_BYTES);
    const block = Buffer.allocUnsafe(end - start + carry.length);
    const bytesRead = readSync(file, block, 0, end - start, start);
    if (bytesRead !== end - start) return undefined;
    carry.copy(block, bytesRead);
    end = start;
    let entryEnd = block.length;
    if (!sawNewline) {
      entryEnd = block.lastIndexOf(NEWLINE) + 1;
      if (entryEnd === 0) continue;
      sawNewline = true;
    }
    // Each entry ends at a newline; the one before it ends the entry before.
    for (;;) {
      const before = entryEnd >= 2 ? block.lastIndexOf(NEWLINE, entryEnd - 2) : -1;
      if (before < 0 && start > 0) {
        carry = block.subarray(0, entryEnd);
        break;
      }
      const text = entryText(block.subarray(before + 1, entryEnd));
      if (text === undefined) return undefined;
      texts.push(text);
      textBytes += text.length;
      newlines += countNewlines(text);
      if (newlines > lines) return { texts, newlines, cut: false, reachedStart: false };
      if (textBytes > MAX_LOG_BYTES) return { texts, newlines, cut: true, reachedStart: false };
      if (before < 0) break;
      entryEnd = before + 1;
    }
  }
  return { texts, newlines, cut: false, reachedStart: true };
}

/** An entry's text; undefined for a line that is not one of the engine's entries. */
function entryText(line: Buffer): Buffer | undefined {
  try {
    const entry = JSON.parse(line.toString('utf8')) as { log?: unknown };
    return typeof entry.log === 'string' ? Buffer.from(entry.log, 'utf8') : undefined;
  } catch {
    return undefined;
  }
}

/** Whether the engine rotated the log (`max-file` above 1): its older entries are in `<path>.1`, perhaps compressed. */
function rotated(logPath: string): boolean {
  return existsSync(`${logPath}.1`) || existsSync(`${logPath}.1.gz`);
}
