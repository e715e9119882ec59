import { PassThrough, Writable } from 'node:stream';
import { Exec } from '@kubernetes/client-node';
import type { KubeConfig, V1Status } from '@kubernetes/client-node';
import { BoundedOutput } from '../command-output.js';
import type { CommandBounds, CommandResult } from '../command-output.js';

/** The pod's container a command runs in. */
export interface ExecTarget {
  readonly namespace: string;
  readonly pod: string;
  readonly container: string;
}

/** The first line of standard error from the wrapper: the process id the command then runs as (`exec` keeps it). */
const PID_MARK = 'bot-agent-exec-pid ';
/**
 * Closing an exec's stream does not end its process (the kubelet leaves it running), so the command runs under a
 * shell that tells its process id and then becomes the command itself: `exec "$@"` passes the argument list as it
 * is, with no shell reading it. At the time-out that process is killed by a second exec.
 */
const WRAPPER = ['sh', '-c', `echo "${PID_MARK}$$" >&2; exec "$@"`, 'sh'];

/**
 * Runs `argv` in the pod's container (Kubernetes exec over the API server), its output bounded, killed at
 * `bounds.timeoutMs` (docs/api.md §18). A container with no `sh` runs the command as it is; one of those that
 * outlasts its time-out is left behind, and the result says so.
 */
export async function execInPod(kubeConfig: KubeConfig, target: ExecTarget, argv: readonly string[], bounds: CommandBounds): Promise<CommandResult> {
  const wrapped = await execOnce(kubeConfig, target, [...WRAPPER, ...argv], bounds, true);
  const { exitCode, timedOut, message } = wrapped.result;
  if (wrapped.pid === undefined && exitCode === null && !timedOut && /not found|no such file/i.test(message ?? '')) {
    // The container has no shell: nothing ran, so the command runs once, on its own.
    return (await execOnce(kubeConfig, target, [...argv], bounds, false)).result;
  }
  if (timedOut && wrapped.pid !== undefined) {
    const { result: kill } = await execOnce(kubeConfig, target, ['sh', '-c', 'kill -9 "$1"', 'sh', String(wrapped.pid)], { timeoutMs: 10_000, maxBytes: 1_000 }, false);
    if (kill.exitCode !== 0) return { ...wrapped.result, message: `timed out at ${bounds.timeoutMs / 1000} s, and could not be killed: ${kill.message ?? kill.output}`.slice(0, 500) };
  }
  return wrapped.result;
}

interface Ran {
  readonly result: CommandResult;
  /** The process the command ran as, where the wrapper told it. */
  readonly pid: number | undefined;
}

async function execOnce(kubeConfig: KubeConfig, target: ExecTarget, command: string[], bounds: CommandBounds, wrapped: boolean): Promise<Ran> {
  const output = new BoundedOutput(bounds.maxBytes);
  const stdout = new PassThrough();
  stdout.on('data', (chunk: Buffer) => output.write(chunk));
  const stderr = wrapped ? new MarkedStream((chunk) => output.write(chunk)) : stdout;
  let status: V1Status | undefined;
  let timedOut = false;
  const socket = await new Exec(kubeConfig).exec(target.namespace, target.pod, target.container, command, stdout, stderr, null, false, (answered) => {
    status = answered;
  });
  await new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      timedOut = true;
      socket.close();
      resolve();
    }, bounds.timeoutMs);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
    socket.once('error', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  const pid = stderr instanceof MarkedStream ? stderr.pid : undefined;
  const exitCode = timedOut ? null : exitCodeOf(status);
  const message = timedOut
    ? wrapped && pid === undefined
      ? `timed out at ${bounds.timeoutMs / 1000} s before it said its process, which the agent could not kill`
      : `killed at its time-out of ${bounds.timeoutMs / 1000} s`
    : status?.status === 'Failure' && exitCode === null
      ? (status.message ?? 'it failed').slice(0, 500)
      : null;
  return { result: { exitCode, output: output.end(), truncated: output.truncated, timedOut, message }, pid };
}

/** Standard error with the wrapper's first line taken off (its process id kept); the rest passed on. */
class MarkedStream extends Writable {
  pid: number | undefined;
  private head: Buffer | undefined = Buffer.alloc(0);

  constructor(private readonly onData: (chunk: Buffer) => void) {
    super();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: () => void): void {
    if (this.head === undefined) {
      this.onData(chunk);
      return done();
    }
    this.head = Buffer.concat([this.head, chunk]);
    const end = this.head.indexOf(0x0a);
    if (end < 0 && this.head.length < 100) return done();
    const line = this.head.subarray(0, end < 0 ? 0 : end).toString('latin1');
    const rest = line.startsWith(PID_MARK) ? this.head.subarray(end + 1) : this.head;
    if (line.startsWith(PID_MARK)) this.pid = Number(line.slice(PID_MARK.length)) || undefined;
    this.head = undefined;
    if (rest.length > 0) this.onData(rest);
    done();
  }

  override _final(done: () => void): void {
    if (this.head !== undefined && this.head.length > 0) this.onData(this.head);
    this.head = undefined;
    done();
  }
}

/** The exit code the API server's closing status says: `Success` is 0, a non-zero exit is its `ExitCode` cause. */
function exitCodeOf(status: V1Status | undefined): number | null {
  if (status?.status === 'Success') return 0;
  const code = status?.details?.causes?.find((cause) => cause.reason === 'ExitCode')?.message;
  return code === undefined ? null : Number(code);
}
