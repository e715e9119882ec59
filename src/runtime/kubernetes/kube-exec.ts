import { PassThrough } from 'node:stream';
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

/**
 * Runs `argv` in the pod's container (Kubernetes exec over the API server: no shell unless `argv` names one),
 * its output bounded. Past `bounds.timeoutMs` its stream is closed, and the container runtime kills what the
 * stream ran (the kubelet cancels the exec with it).
 */
export async function execInPod(kubeConfig: KubeConfig, target: ExecTarget, argv: readonly string[], bounds: CommandBounds): Promise<CommandResult> {
  const output = new BoundedOutput(bounds.maxBytes);
  const both = new PassThrough();
  both.on('data', (chunk: Buffer) => output.write(chunk));
  let status: V1Status | undefined;
  let timedOut = false;
  const socket = await new Exec(kubeConfig).exec(target.namespace, target.pod, target.container, [...argv], both, both, null, false, (answered) => {
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
  return {
    exitCode: timedOut ? null : exitCodeOf(status),
    output: output.end(),
    truncated: output.truncated,
    timedOut,
    message: timedOut ? `killed at its time-out of ${bounds.timeoutMs / 1000} s` : status?.status === 'Failure' && exitCodeOf(status) === null ? (status.message ?? 'it failed').slice(0, 500) : null,
  };
}

/** The exit code the API server's closing status says: `Success` is 0, a non-zero exit is its `ExitCode` cause. */
function exitCodeOf(status: V1Status | undefined): number | null {
  if (status?.status === 'Success') return 0;
  const code = status?.details?.causes?.find((cause) => cause.reason === 'ExitCode')?.message;
  return code === undefined ? null : Number(code);
}
