import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { narrowFiles, PRIVATE_FILE_MODE, privateDir } from '../private-files.js';

/** The spool's file of writes waiting, its record of the last one written, and where damaged lines are set aside. */
export const SPOOL_FILE = 'history-spool.jsonl';
export const DONE_FILE = 'history-spool.done';
export const DAMAGED_FILE = 'history-spool.damaged';
/** Past this many lines written, and more bytes of them than of lines waiting, the file is rewritten with only those waiting. */
const COMPACT_AFTER_LINES = 1_000;
/** The part of the spool's bytes one share (one bot) may hold waiting, ... */
export const SHARE_PART = 1 / 16;
/** ... and the part kept for writes of no share (a removal, a sign-out), which shared writes never take. */
export const UNSHARED_PART = 1 / 8;

/** One line of the spool's file: its number, and the write. */
interface SpooledLine {
  readonly n: number;
  readonly w: unknown;
}

/** A write waiting, as it stands in the file. */
interface Waiting {
  readonly n: number;
  readonly text: string;
  readonly bytes: number;
  /** Whose write it is (shareOf), if anyone's. */
  readonly share: string | undefined;
}

/**
 * What the history must still write while its store is away (a database
 * stopped, frozen or cut off), in the order it was asked for: numbered JSON
 * lines in memory and appended to a file under AGENT_DATA_DIR, so that an
 * agent restarted meanwhile still writes them (docs/api.md §11).
 *
 * Crash-safe at any byte: each line carries its number and a second file holds
 * the number of the last one written, so the two can never disagree (a rewrite
 * of the file keeps the numbers). A line cut off by a kill, an OOM or a full
 * disk, or one that is not a write, is set aside in a file of its own and
 * counted; every whole line is still written. Bounded in bytes: the file on
 * disk (lines written and waiting) stays within `maxBytes`, and past that
 * many bytes waiting a new write is refused and counted as dropped. Fair:
 * the writes of one share (`shareOf`: one bot's) hold at most SHARE_PART of
 * `maxBytes`, and all shares together leave UNSHARED_PART to writes of none,
 * so that no bot fills the spool for the others or for the platform.
 */
export class HistorySpool<T> {
  private readonly lines: Waiting[] = [];
  private waitingTotal = 0;
  /** Bytes waiting of each share, and of all shares together. */
  private readonly shareBytes = new Map<string, number>();
  private sharedTotal = 0;
  /** Bytes of the file on disk: lines written already and those waiting. */
  private fileBytes = 0;
  /** The number of the last line written, and of the last one spooled. */
  private doneN = 0;
  private lastN = 0;
  /** Lines at the head of the file written already. */
  private doneLines = 0;
  /** Set when a write to the file failed part-way: the next one rewrites it whole, so no half line stays in it. */
  private fileSound = true;
  /** Writes refused because the spool was full. */
  dropped = 0;
  /** Lines found damaged (cut off, or not a write) and set aside, since the agent started. */
  damaged = 0;

  /** `dir` undefined (a store in memory): the spool is kept in memory only. */
  constructor(
    private readonly dir: string | undefined,
    private readonly maxBytes: number,
    private readonly report: (what: string, err: unknown) => void = () => undefined,
    private readonly shareOf: (item: T) => string | undefined = () => undefined,
  ) {
    if (dir === undefined) return;
    try {
      privateDir(dir);
      // Files an earlier version made readable to all: they hold bot log lines and session nonces.
      narrowFiles(dir, [SPOOL_FILE, DONE_FILE, DAMAGED_FILE]);
      this.doneN = Number.parseInt(readOr(join(dir, DONE_FILE), '0'), 10) || 0;
      this.lastN = this.doneN;
      this.load(readOr(join(dir, SPOOL_FILE), ''));
    } catch (err) {
      report('the history spool could not be read', err);
    }
  }

  /** How many writes wait. */
  get size(): number {
    return this.lines.length;
  }

  /** How many bytes of JSON wait. */
  get waitingBytes(): number {
    return this.waitingTotal;
  }

  /** Queues `item` after those waiting; false (and counted as dropped) when the spool is full. */
  add(item: T): boolean {
    const n = this.lastN + 1;
    const text = JSON.stringify({ n, w: item } satisfies SpooledLine);
    const bytes = Buffer.byteLength(text) + 1;
    const share = this.shareOf(item);
    if (!this.hasRoom(share, bytes)) {
      this.dropped += 1;
      return false;
    }
    this.lastN = n;
    this.keep({ n, text, bytes, share });
    this.onDisk((dir) => {
      // The file holds lines written already too: it is rewritten with those waiting before it would pass the bound.
      if (!this.fileSound || this.fileBytes + bytes > this.maxBytes) this.rewrite(dir);
      else {
        this.fileSound = false;
        appendDurably(join(dir, SPOOL_FILE), `${text}\n`);
        this.fileSound = true;
        this.fileBytes += bytes;
      }
    });
    return true;
  }

  /** The oldest write waiting. */
  first(): T | undefined {
    const line = this.lines[0];
    return line === undefined ? undefined : ((JSON.parse(line.text) as SpooledLine).w as T);
  }

  /** The oldest write is written: it leaves the spool (and the file, once none waits). */
  shift(): void {
    const line = this.lines.shift();
    if (line === undefined) return;
    this.waitingTotal -= line.bytes;
    this.countShare(line.share, -line.bytes);
    this.doneN = line.n;
    this.doneLines += 1;
    this.onDisk((dir) => {
      // The number first: a crash after it leaves a file whose written lines the number skips.
      replaceDurably(join(dir, DONE_FILE), String(this.doneN));
      if (this.lines.length === 0) {
        rmSync(join(dir, SPOOL_FILE), { force: true });
        this.fileBytes = 0;
        this.doneLines = 0;
        this.fileSound = true;
      } else if (!this.fileSound || (this.doneLines >= COMPACT_AFTER_LINES && this.fileBytes - this.waitingTotal > this.waitingTotal)) {
        this.rewrite(dir);
      }
    });
  }

  /** Every write waiting, oldest first. */
  *waiting(): Generator<T> {
    for (const line of this.lines) yield (JSON.parse(line.text) as SpooledLine).w as T;
  }

  /** Whether a write of `share` of `bytes` fits: within the spool, within its share, and leaving writes of none their part. */
  private hasRoom(share: string | undefined, bytes: number): boolean {
    if (this.waitingTotal + bytes > this.maxBytes) return false;
    if (share === undefined) return true;
    return (this.shareBytes.get(share) ?? 0) + bytes <= this.maxBytes * SHARE_PART && this.sharedTotal + bytes <= this.maxBytes * (1 - UNSHARED_PART);
  }

  private keep(line: Waiting): void {
    this.lines.push(line);
    this.waitingTotal += line.bytes;
    this.countShare(line.share, line.bytes);
  }

  private countShare(share: string | undefined, bytes: number): void {
    if (share === undefined) return;
    this.sharedTotal += bytes;
    const held = (this.shareBytes.get(share) ?? 0) + bytes;
    if (held <= 0) this.shareBytes.delete(share);
    else this.shareBytes.set(share, held);
  }

  /** Takes the file's whole lines after the last one written; sets aside what is damaged, and rewrites the file without it. */
  private load(text: string): void {
    if (text === '') return;
    const pieces = text.split('\n');
    // The last piece is what follows the last newline: empty, or a line cut off.
    const cutOff = pieces.pop() ?? '';
    const damaged: string[] = cutOff === '' ? [] : [cutOff];
    let legacy = false;
    for (const [index, piece] of pieces.entries()) {
      if (piece === '') continue;
      let line = parseLine(piece);
      // A spool of the version before numbered lines: its done file counted lines, so a line's number is its place.
      if (line !== undefined && line.n === undefined) {
        legacy = true;
        line = { n: index + 1, w: line.w };
      }
      if (line === undefined) {
        damaged.push(piece);
        continue;
      }
      const n = line.n!;
      this.lastN = Math.max(this.lastN, n);
      if (n <= this.doneN) continue;
      const lineText = JSON.stringify({ n, w: line.w });
      this.keep({ n, text: lineText, bytes: Buffer.byteLength(lineText) + 1, share: this.shareOf(line.w as T) });
    }
    // Numbers only grow in the file: a line out of order can only be damage that happened to parse.
    this.lines.sort((a, b) => a.n - b.n);
    this.fileBytes = Buffer.byteLength(text);
    if (damaged.length > 0) {
      this.damaged += damaged.length;
      this.setAside(damaged);
    }
    if (legacy || damaged.length > 0 || this.fileBytes > this.maxBytes) this.onDisk((dir) => this.rewrite(dir));
  }

  /** Keeps damaged lines in a file of their own (within the spool's bound), and says so once. */
  private setAside(damaged: string[]): void {
    const dir = this.dir!;
    const file = join(dir, DAMAGED_FILE);
    let room = this.maxBytes - sizeOr(file, 0);
    const kept = damaged.filter((piece) => (room -= Buffer.byteLength(piece) + 1) >= 0);
    this.onDisk(() => appendDurably(file, kept.map((piece) => `${piece}\n`).join('')));
    this.report(
      `the history spool held ${damaged.length} damaged line(s) (cut off by a crash or a full disk): set aside in ${file}` +
        (kept.length < damaged.length ? `, ${damaged.length - kept.length} of them not kept (that file is full)` : '') +
        '; every whole line is still written',
      undefined,
    );
  }

  /** Replaces the file with the lines waiting. */
  private rewrite(dir: string): void {
    replaceDurably(join(dir, SPOOL_FILE), this.lines.map((line) => `${line.text}\n`).join(''));
    this.fileBytes = this.waitingTotal;
    this.doneLines = 0;
    this.fileSound = true;
  }

  /** What the spool keeps on disk; a disk that fails leaves it in memory (and says so). */
  private onDisk(write: (dir: string) => void): void {
    if (this.dir === undefined) return;
    try {
      write(this.dir);
    } catch (err) {
      this.report('the history spool could not be written to disk; it is kept in memory', err);
    }
  }
}

/** A line of the file, if it is one: a whole JSON object with its number and a write (no number: a line of the version before). */
function parseLine(piece: string): { n: number | undefined; w: object } | undefined {
  try {
    const line = JSON.parse(piece) as Partial<SpooledLine> | null;
    if (line === null || typeof line !== 'object') return undefined;
    if (!('n' in line)) return 'kind' in line ? { n: undefined, w: line } : undefined;
    if (!Number.isSafeInteger(line.n) || (line.n as number) < 1 || line.w === null || typeof line.w !== 'object') return undefined;
    return { n: line.n, w: line.w };
  } catch {
    return undefined;
  }
}

/** Appends and flushes to the disk before returning. */
function appendDurably(path: string, text: string): void {
  const fd = openSync(path, 'a', PRIVATE_FILE_MODE);
  try {
    writeFileSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Replaces the file's text at once: a reader (or a restart after a crash) finds the old text or the new, never part of one. */
function replaceDurably(path: string, text: string): void {
  const fd = openSync(`${path}.new`, 'w', PRIVATE_FILE_MODE);
  try {
    writeFileSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(`${path}.new`, path);
  // The rename itself reaches the disk with its folder.
  const folder = openSync(dirname(path), 'r');
  try {
    fsyncSync(folder);
  } finally {
    closeSync(folder);
  }
}

function readOr(path: string, otherwise: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return otherwise;
    throw err;
  }
}

function sizeOr(path: string, otherwise: number): number {
  try {
    return statSync(path).size;
  } catch {
    return otherwise;
  }
}
