import { appendFileSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The spool's file of writes waiting, and the file that counts those of its lines already written. */
const SPOOL_FILE = 'history-spool.jsonl';
const DONE_FILE = 'history-spool.done';
/** Past this many lines written, and more of them than lines waiting, the file is rewritten with only those waiting. */
const COMPACT_AFTER_LINES = 1_000;

/**
 * What the history must still write while its store is away (a database
 * stopped, frozen or cut off), in the order it was asked for: JSON lines in
 * memory and appended to a file under AGENT_DATA_DIR, so that an agent
 * restarted meanwhile still writes them. A second file counts the lines
 * written already, so that none is written twice. Bounded: past `maxBytes`
 * waiting, a new write is refused and counted as dropped.
 */
export class HistorySpool<T> {
  private readonly lines: string[] = [];
  private bytes = 0;
  /** Lines at the head of the file written already. */
  private doneLines = 0;
  /** Writes refused because the spool was full. */
  dropped = 0;

  /** `dir` undefined (a store in memory): the spool is kept in memory only. */
  constructor(
    private readonly dir: string | undefined,
    private readonly maxBytes: number,
    private readonly report: (what: string, err: unknown) => void = () => undefined,
  ) {
    if (dir === undefined) return;
    try {
      mkdirSync(dir, { recursive: true });
      const text = readFileSync(join(dir, SPOOL_FILE), 'utf8');
      this.doneLines = Number.parseInt(readOr(join(dir, DONE_FILE), '0'), 10) || 0;
      for (const line of text.split('\n').slice(this.doneLines)) {
        if (line === '') continue;
        this.lines.push(line);
        this.bytes += line.length + 1;
      }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') report('the history spool could not be read', err);
    }
  }

  /** How many writes wait. */
  get size(): number {
    return this.lines.length;
  }

  /** How many bytes of JSON wait. */
  get waitingBytes(): number {
    return this.bytes;
  }

  /** Queues `item` after those waiting; false (and counted as dropped) when the spool is full. */
  add(item: T): boolean {
    const line = JSON.stringify(item);
    if (this.bytes + line.length + 1 > this.maxBytes) {
      this.dropped += 1;
      return false;
    }
    this.lines.push(line);
    this.bytes += line.length + 1;
    this.onDisk((dir) => appendFileSync(join(dir, SPOOL_FILE), `${line}\n`));
    return true;
  }

  /** The oldest write waiting. */
  first(): T | undefined {
    const line = this.lines[0];
    return line === undefined ? undefined : (JSON.parse(line) as T);
  }

  /** The oldest write is written: it leaves the spool (and the files once none waits). */
  shift(): void {
    const line = this.lines.shift();
    if (line === undefined) return;
    this.bytes -= line.length + 1;
    this.doneLines += 1;
    this.onDisk((dir) => {
      if (this.lines.length === 0) {
        rmSync(join(dir, SPOOL_FILE), { force: true });
        rmSync(join(dir, DONE_FILE), { force: true });
        this.doneLines = 0;
      } else if (this.doneLines >= COMPACT_AFTER_LINES && this.doneLines > this.lines.length) {
        // The file only grows while writes keep coming: rewritten with what waits. The count is reset
        // first: a crash in between writes some lines twice (a run's are kept once), never skips one.
        this.doneLines = 0;
        replaceFile(join(dir, DONE_FILE), '0');
        replaceFile(join(dir, SPOOL_FILE), this.lines.map((waiting) => `${waiting}\n`).join(''));
      } else {
        replaceFile(join(dir, DONE_FILE), String(this.doneLines));
      }
    });
  }

  /** Every write waiting, oldest first. */
  *waiting(): Generator<T> {
    for (const line of this.lines) yield JSON.parse(line) as T;
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

/** Replaces the file's text at once: a reader finds the old text or the new, never part of one. */
function replaceFile(path: string, text: string): void {
  writeFileSync(`${path}.new`, text);
  renameSync(`${path}.new`, path);
}

function readOr(path: string, otherwise: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return otherwise;
  }
}
