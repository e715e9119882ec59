import { PassThrough } from 'node:stream';
import type { Readable } from 'node:stream';
import { Exec } from '@kubernetes/client-node';
import type { KubeConfig, V1Status } from '@kubernetes/client-node';
import type WebSocket from 'isomorphic-ws';
import type { ExecTarget } from './kube-exec.js';

/** What the WebSocket may hold unsent of standard input before the input is paused, and what it resumes under. */
const SEND_HIGH_BYTES = 4 * 1024 * 1024;
const SEND_LOW_BYTES = 1024 * 1024;
/** The most of a command's standard error kept for its failure's message. */
const STDERR_BYTES = 2_000;

/**
 * client-node writes what the API server sends into the streams given to `exec` and sends standard input as fast as
 * it reads, with no regard for either side's pace. A command's output of a gigabyte (a tar of a bot's data) must not
 * pile up in the agent's memory, so the socket is paused while its reader is behind, and the input is fed at the
 * socket's pace.
 */
class PacedOutput extends PassThrough {
  socket: WebSocket.WebSocket | undefined;

  constructor() {
    super();
    this.on('drain', () => this.socket?.resume());
  }

  override write(chunk: unknown, ...rest: unknown[]): boolean {
    const room = super.write(chunk as Buffer, ...(rest as [BufferEncoding]));
    if (!room) this.socket?.pause();
    return room;
  }

  /** client-node ends the stream at the command's end whatever its status: it is ended here, once the status says it succeeded. */
  override end(): this {
    return this;
  }

  finish(): void {
    super.end();
  }

  paceWith(socket: WebSocket.WebSocket): void {
    this.socket = socket;
    if (this.writableNeedDrain) socket.pause();
  }
}

/** A command run over the API server with its output streamed, and its end. */
export interface StreamedCommand {
  /** Standard output; it errs, after its last byte, where the command did not exit with 0. */
  readonly output: Readable;
  /** Settles once the command ended: its failure's message (the end of its standard error) where it did not exit with 0. */
  readonly ended: Promise<void>;
}

/**
 * Runs `argv` in the pod's container (Kubernetes exec over the API server) with `input` as its standard input,
 * its standard output streamed at its reader's pace (docs/api.md §20). `signal` closes the socket.
 */
export async function streamFromPod(kubeConfig: KubeConfig, target: ExecTarget, argv: readonly string[], signal: AbortSignal, input?: Readable): Promise<StreamedCommand> {
  signal.throwIfAborted();
  const output = new PacedOutput();
  const stderr = new PassThrough();
  let errorText = '';
  stderr.on('data', (chunk: Buffer) => {
    if (errorText.length < STDERR_BYTES * 2) errorText = (errorText + chunk.toString('utf8')).slice(-STDERR_BYTES);
  });
  let status: V1Status | undefined;
  const feed = input ? new PassThrough() : null;
  const socket = await new Exec(kubeConfig)
    .exec(target.namespace, target.pod, target.container, [...argv], output, stderr, feed, false, (answered) => {
      status = answered;
    })
    .catch((err: unknown) => {
      // Never begun: its input (an archive's open file) is let go at once.
      input?.destroy();
      throw err;
    });
  output.paceWith(socket);
  const close = () => socket.close();
  signal.addEventListener('abort', close, { once: true });
  // A reader that gives up (its file's disk full, its store gone) ends the command: nothing waits on it for ever.
  output.once('close', close);
  const ended = new Promise<void>((resolve, reject) => {
    const end = (err?: Error) => {
      signal.removeEventListener('abort', close);
      input?.destroy();
      if (status?.status === 'Success') {
        output.finish();
        return resolve();
      }
      const why = signal.aborted
        ? 'cut short'
        : status
          ? `${status.message ?? 'it failed'}${errorText.trim() ? `: ${errorText.trim()}` : ''}`
          : `the API server closed the command's stream without its end${err ? ` (${err.message})` : ''}`;
      const failure = new Error(`${argv[0]} in pod ${target.pod} failed: ${why}`.slice(0, 2_500));
      output.destroy(failure);
      reject(failure);
    };
    socket.once('close', () => end());
    socket.once('error', (err: Error) => end(err));
  });
  if (input && feed) void feedPaced(input, feed, socket);
  ended.catch(() => undefined);
  return { output, ended };
}

/** Hands `input` to the socket no faster than it sends it. */
async function feedPaced(input: Readable, feed: PassThrough, socket: WebSocket.WebSocket): Promise<void> {
  try {
    for await (const chunk of input) {
      feed.write(chunk as Buffer);
      if (socket.bufferedAmount > SEND_HIGH_BYTES) {
        while (socket.bufferedAmount > SEND_LOW_BYTES && socket.readyState === socket.OPEN) await new Promise((resolve) => setTimeout(resolve, 10));
      }
      if (socket.readyState !== socket.OPEN) return;
    }
    feed.end();
  } catch {
    // The input failed (its archive unreadable): the command is ended unfinished, so nothing half-read is taken as whole.
    socket.close();
  }
}
