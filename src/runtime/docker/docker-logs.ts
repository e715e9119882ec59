import type { IncomingMessage } from 'node:http';
import { finished } from 'node:stream/promises';
import type Docker from 'dockerode';
import type DockerModem from 'docker-modem';
import type { LogLine, LogsFrom, LogWindow } from '../driver.js';
import { TimestampedLines } from '../log-lines.js';
import { countLines, countNewlines, lastLines, MAX_LOG_BYTES, TailBuffer } from '../log-tail.js';
import { DockerLogDemuxer } from './docker-log-frames.js';
import { ENGINE_DEADLINE_MS } from './docker-deadline.js';

/** How much more a read asks for when the entries it got did not hold whole lines. */
const ENTRIES_GROWTH = 8;

interface Collected {
  readonly bytes: Buffer;
  readonly cut: boolean;
  /** Log entries the engine sent, when the stream is framed (no TTY). */
  readonly entries: number | undefined;
}

/** Where a read's payload bytes go, in order. */
interface Sink {
  push(bytes: Buffer): void;
}

/**
 * Opens the container's logs as a stream. dockerode's own `logs` buffers a
 * non-following answer whole and turns it into a string to try it as JSON:
 * unbounded memory, and an answer that happens to be JSON comes back parsed.
 */
function openLogs(docker: Docker, containerId: string, query: LogsQuery, signal: AbortSignal): Promise<IncomingMessage> {
  const modem = docker.modem as DockerModem;
  return new Promise((resolve, reject) => {
    modem.dial(
      {
        path: `/containers/${encodeURIComponent(containerId)}/logs?`,
        method: 'GET',
        isStream: true,
        abortSignal: signal,
        statusCodes: { 200: true, 404: 'no such container', 500: 'server error' },
        options: { stdout: true, stderr: true, ...query },
      },
      (err, stream) => (err ? reject(err) : resolve(stream as IncomingMessage)),
    );
  });
}

/** The engine's logs query: `since` and `until` are seconds since the epoch, with a fraction. */
interface LogsQuery {
  readonly tail?: number | 'all';
  readonly follow?: boolean;
  readonly timestamps?: boolean;
  readonly since?: string;
  readonly until?: string;
}

/** A time as the engine's logs query takes it. */
const engineTime = (time: Date): string => (time.getTime() / 1000).toFixed(3);


/** Hands the payload of the last `tail` log entries within `window` to `sink`; answers how many entries a framed stream sent. */
async function stream(docker: Docker, containerId: string, tty: boolean, tail: number, window: LogWindow, sink: Sink): Promise<number | undefined> {
  const controller = new AbortController();
  // The engine may stay silent between chunks as long as any quick call may take. A chunk only notes the
  // time: refreshing the timer on each (the engine sends one per entry) cost a timer list insertion each.
  let heardAt = Date.now();
  const watchSilence = (): NodeJS.Timeout =>
    setTimeout(() => {
      const silentMs = Date.now() - heardAt;
      if (silentMs >= ENGINE_DEADLINE_MS) controller.abort();
      else silence = watchSilence();
    }, ENGINE_DEADLINE_MS - (Date.now() - heardAt));
  let silence = watchSilence();
  try {
    const query: LogsQuery = {
      tail,
      follow: false,
      ...(window.since && { since: engineTime(window.since) }),
      ...(window.until && { until: engineTime(window.until) }),
    };
    const answer = await openLogs(docker, containerId, query, controller.signal);
    const demuxer = tty ? undefined : new DockerLogDemuxer((_stream, bytes) => sink.push(bytes));
    // Chunks as they come: the engine sends a chunk per log entry, and an async iterator costs a promise each.
    answer.on('data', (chunk: Buffer) => {
      heardAt = Date.now();
      if (demuxer) demuxer.push(chunk);
      else sink.push(chunk);
    });
    await finished(answer);
    return demuxer?.frames;
  } finally {
    clearTimeout(silence);
  }
}

/** Reads the last `tail` log entries within `window`, keeping only the newest bytes an answer can hold. */
async function collect(docker: Docker, containerId: string, tty: boolean, tail: number, window: LogWindow): Promise<Collected> {
  const kept = new TailBuffer();
  const entries = await stream(docker, containerId, tty, tail, window, kept);
  return { bytes: kept.bytes(), cut: kept.cut, entries };
}

/** The engine stores a line longer than this as several log entries. */
const ENTRY_BYTES = 16 * 1024;

/** Whether some line of `bytes` reaches ENTRY_BYTES, and so may be stored as several entries. */
function hasSplitLine(bytes: Buffer): boolean {
  let start = 0;
  for (let newline = bytes.indexOf(0x0a); newline >= 0; newline = bytes.indexOf(0x0a, start)) {
    if (newline - start >= ENTRY_BYTES) return true;
    start = newline + 1;
  }
  return bytes.length - start >= ENTRY_BYTES;
}

/** Lines of `bytes` that are surely whole: those after its first newline (the first may have begun earlier). */
function wholeLines(bytes: Buffer): number {
  const newline = bytes.indexOf(0x0a);
  return newline < 0 ? 0 : countLines(bytes.subarray(newline + 1));
}

/** Entries enough to exceed what an answer holds, were each as long as the engine makes one. */
const FIRST_TAIL = Math.ceil(MAX_LOG_BYTES / ENTRY_BYTES) + 1;

/**
 * The answer to a logs read of a container: its last `lines` lines, bounded
 * as docs/api.md §2 says. The engine stores a line longer than 16 KiB as
 * several entries, so its `tail` counts entries, not lines; and it reads and
 * decodes every entry a tail asks for, however few bytes the answer keeps. So
 * a read asks for at most FIRST_TAIL entries first, then for as many more as
 * the lines still wanted or the bytes an answer still has room for call for,
 * whichever is fewer, until it has the lines, holds the most an answer can
 * carry, or has every entry there is: a bot's long lines cost the engine about
 * what the answer carries, not what the bot wrote.
 */
export async function readLogs(docker: Docker, containerId: string, tty: boolean, lines: number, window: LogWindow = {}): Promise<string> {
  let tail = Math.min(lines + 1, FIRST_TAIL);
  let previousSize = -1;
  for (;;) {
    const collected = await collect(docker, containerId, tty, tail, window);
    const { bytes, cut } = collected;
    // A framed stream counts its entries; on a terminal, each line is one entry unless one is long
    // enough to have been split, and then the text is complete when asking for more brought nothing.
    const entries = entryCount(collected);
    const sentAll = entries !== undefined ? entries < tail : bytes.length === previousSize;
    if (cut || wholeLines(bytes) >= lines) return lastLines(bytes, lines, { cut: cut || !sentAll, tty });
    if (sentAll) {
      // The engine takes the last `tail` entries first and drops those after `until` only then: a later run's
      // entries (a restart policy's next run, writing since) may have taken the places of this window's last ones.
      // The window is whole once those and its own entries did not fill the tail; else it is widened, up to a cap.
      const later = window.until && entries !== undefined && tail < WINDOW_TAIL_MAX ? await entriesAfter(docker, containerId, tty, tail, window.until) : 0;
      if (later === 0 || entries === undefined || entries + later < tail) return lastLines(bytes, lines, { cut: false, tty });
      // Room for the later entries and as many again written meanwhile; at least twice the tail, so it ends soon.
      tail = Math.min(WINDOW_TAIL_MAX, Math.max(2 * tail, tail + 2 * later));
      previousSize = -1;
      continue;
    }
    previousSize = bytes.length;
    tail = nextTail(tail, bytes.length, lines);
  }
}

/**
 * How many entries to ask for after `tail` of them brought `bytes` bytes, too few whole lines and not all
 * there is: enough for the lines wanted (one entry a line until lines proved longer), or enough to fill an
 * answer at the size entries had so far (with a quarter to spare), whichever is fewer; at least twice as many.
 */
function nextTail(tail: number, bytes: number, lines: number): number {
  const forLines = tail <= lines ? lines + 1 : tail * ENTRIES_GROWTH;
  const forBytes = Math.ceil((tail * MAX_LOG_BYTES * 1.25) / Math.max(bytes, 1));
  return Math.max(2 * tail, Math.min(forLines, forBytes));
}

/**
 * The most entries a read of a window asks for to get past those written after it: each costs the engine
 * a decode, and a next run that floods is the bot's own doing, so beyond this its record keeps what fits.
 */
const WINDOW_TAIL_MAX = 8 * FIRST_TAIL;

/** The log entries a read sent, or, on a terminal, its lines while none may have been split; undefined when unknown. */
function entryCount(collected: Collected): number | undefined {
  return collected.entries ?? (hasSplitLine(collected.bytes) ? undefined : countLines(collected.bytes));
}

/** How many of the container's last `tail` entries were written after `until` (counted, not kept; on a terminal, lines). */
async function entriesAfter(docker: Docker, containerId: string, tty: boolean, tail: number, until: Date): Promise<number> {
  let newlines = 0;
  const frames = await stream(docker, containerId, tty, tail, { since: new Date(until.getTime() + 1) }, {
    push: (bytes) => (newlines += countNewlines(bytes)),
  });
  return frames ?? newlines;
}

/**
 * Follows a container's logs (see RuntimeDriver.followLogs) until the engine
 * ends the stream, which it does when the container stops, `signal` aborts, or
 * `nextRun` says a line belongs to a later run. The engine's stream may carry
 * that run too: its reader checks that the container stopped only once it has
 * caught up with the file, and a new run appends to the same file.
 */
export async function followLogs(
  docker: Docker,
  containerId: string,
  tty: boolean,
  from: LogsFrom,
  onLine: (line: LogLine) => void,
  signal: AbortSignal,
  nextRun: (line: LogLine) => boolean = () => false,
): Promise<void> {
  const query: LogsQuery = {
    follow: true,
    timestamps: true,
    ...('since' in from ? { since: engineTime(from.since), tail: 'all' } : { tail: from.lines }),
  };
  const stream = await openLogs(docker, containerId, query, signal);
  // Set at the next run's first line: the loop leaves, which ends the answer (an abort of the request from here
  // would surface as an error nobody listens for).
  let runEnded = false;
  const thisRun = (line: LogLine): void => {
    if (runEnded) return;
    if (nextRun(line)) runEnded = true;
    else onLine(line);
  };
  const stdout = new TimestampedLines('stdout', thisRun);
  const stderr = new TimestampedLines('stderr', thisRun);
  const demuxer = new DockerLogDemuxer((output, bytes, first) => (output === 'stderr' ? stderr : stdout).push(bytes, first));
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      // On a terminal there are no frames: each line the engine sends is an entry with its timestamp.
      if (tty) stdout.pushLines(chunk);
      else demuxer.push(chunk);
      if (runEnded) break;
    }
  } catch (err) {
    if (!signal.aborted) throw err;
  }
  stdout.end();
  stderr.end();
}
