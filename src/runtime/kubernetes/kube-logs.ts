import { Writable } from 'node:stream';
import { Log } from '@kubernetes/client-node';
import type { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import type { LogLine, LogsFrom, LogWindow } from '../driver.js';
import { TimestampedLines } from '../log-lines.js';
import { lastLines, MAX_LOG_BYTES, TailBuffer } from '../log-tail.js';
import { withDeadline } from './kube-deadline.js';

/** The container whose logs are read. */
export interface LogTarget {
  readonly namespace: string;
  readonly pod: string;
  readonly container: string | undefined;
  /** The container's previous run, for one that crashed and waits to start again. */
  readonly previous: boolean;
}

/** limitBytes may answer a little more or less than it says: past this margin under it, the answer counts as cut. */
const LIMIT_MARGIN = 64 * 1024;
/** How long the API server may stay silent while it streams logs before it counts as stalled. */
const SILENCE_DEADLINE_MS = 1_500;

/**
 * The container's last `lines` lines, bounded as docs/api.md §2 says. One
 * call with `limitBytes` answers almost every read; but limitBytes keeps the
 * oldest bytes of the tail, so when the answer reaches it, the tail is
 * streamed instead, keeping only its newest bytes.
 */
export async function readPodLogs(core: CoreV1Api, kubeConfig: KubeConfig, target: LogTarget, lines: number, window: LogWindow = {}): Promise<string> {
  // The kubelet reads from a time (to the second), never up to one: a window is found in its lines' own timestamps.
  if (window.since !== undefined || window.until !== undefined) {
    const kept = await streamWindow(kubeConfig, target, window);
    return lastLines(kept.bytes(), lines, { cut: kept.cut });
  }
  const text = await core.readNamespacedPodLog(
    {
      name: target.pod,
      namespace: target.namespace,
      container: target.container,
      tailLines: lines,
      previous: target.previous,
      limitBytes: MAX_LOG_BYTES + LIMIT_MARGIN,
    },
    withDeadline(),
  );
  // What the kubelet answers, as if logged, for a container it has already removed (or whose log file it
  // removed meanwhile): there are no lines.
  if (/^unable to retrieve container logs for \S+$/.test(text) || /^failed to try resolving symlinks in path "[^"\n]+": lstat [^\n]*no such file or directory\n?$/.test(text)) return '';
  const bytes = Buffer.from(text);
  if (bytes.length < MAX_LOG_BYTES) return lastLines(bytes, lines);
  const kept = await streamTail(kubeConfig, target, { tailLines: lines }, (chunk, into) => into.push(chunk));
  return lastLines(kept.bytes(), lines, { cut: kept.cut });
}

/** The container's lines written after `window.since` and up to `window.until`, kept through a TailBuffer: their newest bytes. */
async function streamWindow(kubeConfig: KubeConfig, target: LogTarget, window: LogWindow): Promise<TailBuffer> {
  const after = window.since?.getTime() ?? -Infinity;
  const until = window.until?.getTime() ?? Infinity;
  // sinceTime is read to the second: its lines from the second before are left out here.
  const asked = { timestamps: true, ...(window.since === undefined ? {} : { sinceTime: new Date(Math.floor(after / 1000) * 1000).toISOString() }) };
  let lines: TimestampedLines | undefined;
  const kept = await streamTail(kubeConfig, target, asked, (chunk, into) => {
    lines ??= new TimestampedLines('stdout', (line) => {
      const at = line.at.getTime();
      if (at > after && at <= until) into.push(Buffer.from(`${line.line}\n`));
    });
    lines.pushLines(chunk);
  });
  lines?.end();
  return kept;
}

/**
 * Where client-node's Log writes a log stream: each chunk goes to `onChunk`;
 * `finished` settles when the stream ends, or fails with it (pipe does not
 * pass a failing response body on, so that is done here).
 */
function logSink(onChunk: (chunk: Buffer) => void): { sink: Writable; finished: Promise<void> } {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      onChunk(chunk);
      done();
    },
  });
  sink.on('pipe', (source: NodeJS.ReadableStream) => source.on('error', (err: Error) => sink.destroy(err)));
  const finished = new Promise<void>((resolve, reject) => {
    sink.on('finish', resolve);
    sink.on('close', resolve);
    sink.on('error', reject);
  });
  // Awaited once the stream is open; a failure before that must not go unhandled.
  finished.catch(() => undefined);
  return { sink, finished };
}

/** Streams the log asked for through a TailBuffer (each chunk as `take` puts it there), so that no size of log is held whole. */
async function streamTail(
  kubeConfig: KubeConfig,
  target: LogTarget,
  asked: { tailLines?: number; sinceTime?: string; timestamps?: boolean },
  take: (chunk: Buffer, into: TailBuffer) => void,
): Promise<TailBuffer> {
  const kept = new TailBuffer();
  let silence: NodeJS.Timeout | undefined;
  let aborted = false;
  let controller: AbortController | undefined;
  const stall = (): void => {
    aborted = true;
    controller?.abort();
    sink.destroy(new DOMException(`the API server sent no logs for ${SILENCE_DEADLINE_MS} ms`, 'TimeoutError'));
  };
  const { sink, finished } = logSink((chunk) => {
    clearTimeout(silence);
    silence = setTimeout(stall, SILENCE_DEADLINE_MS);
    take(chunk, kept);
  });
  silence = setTimeout(stall, SILENCE_DEADLINE_MS);
  try {
    controller = await new Log(kubeConfig).log(target.namespace, target.pod, target.container ?? '', sink, { ...asked, previous: target.previous });
    if (aborted) controller.abort();
    await finished;
    return kept;
  } finally {
    clearTimeout(silence);
  }
}

/**
 * Follows a container's log (see RuntimeDriver.followLogs) until the API
 * server ends the stream, which it does when the container ends, or `signal`
 * aborts. Each line the kubelet sends carries its timestamp; it merges
 * stdout and stderr into one stream.
 */
export async function followPodLogs(
  kubeConfig: KubeConfig,
  target: LogTarget,
  from: LogsFrom,
  onLine: (line: LogLine) => void,
  signal: AbortSignal,
): Promise<void> {
  const lines = new TimestampedLines('stdout', onLine);
  const { sink, finished } = logSink((chunk) => lines.pushLines(chunk));
  const controller = await new Log(kubeConfig).log(target.namespace, target.pod, target.container ?? '', sink, {
    follow: true,
    timestamps: true,
    ...('since' in from ? { sinceTime: from.since.toISOString() } : { tailLines: from.lines }),
  });
  const abort = (): void => {
    controller.abort();
    sink.end();
  };
  if (signal.aborted) abort();
  else signal.addEventListener('abort', abort, { once: true });
  try {
    await finished;
  } catch (err) {
    if (!signal.aborted) throw err;
  } finally {
    signal.removeEventListener('abort', abort);
    lines.end();
  }
}
