import { readFile } from 'node:fs/promises';
import { PassThrough } from 'node:stream';
import type Docker from 'dockerode';
import { BoundedOutput } from '../command-output.js';
import type { CommandBounds, CommandResult } from '../command-output.js';

/** How long the engine is given to say how an exec ended, once its stream closed. */
const INSPECT_WAIT_MS = 5_000;

/**
 * Runs `argv` in the container as its own user (Docker exec: no shell unless `argv` names one), its standard
 * output and error kept in order up to `bounds.maxBytes`. Past `bounds.timeoutMs` its process is killed, where
 * this agent sees the engine's processes (it runs on the engine's host); elsewhere it is left and said so.
 */
export async function execInContainer(docker: Docker, containerId: string, argv: readonly string[], bounds: CommandBounds): Promise<CommandResult> {
  const exec = await docker.getContainer(containerId).exec({ Cmd: [...argv], AttachStdout: true, AttachStderr: true, AttachStdin: false, Tty: false });
  const stream = await exec.start({ hijack: true, stdin: false });
  const output = new BoundedOutput(bounds.maxBytes);
  const both = new PassThrough();
  both.on('data', (chunk: Buffer) => output.write(chunk));
  docker.modem.demuxStream(stream, both, both);
  let timedOut = false;
  let message: string | null = null;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      timedOut = true;
      void killExec(exec, containerId).then((killed) => {
        if (!killed) message = `it outlasted its time-out of ${bounds.timeoutMs / 1000} s and could not be killed from this agent, which does not see the engine's processes: it may still run`;
        stream.destroy();
        resolve();
      });
    }, bounds.timeoutMs);
    const done = () => {
      clearTimeout(timer);
      resolve();
    };
    stream.once('end', done);
    stream.once('close', done);
    stream.once('error', done);
  });
  return { exitCode: await exitCodeOf(exec), output: output.end(), truncated: output.truncated, timedOut, message: message ?? (timedOut ? `killed at its time-out of ${bounds.timeoutMs / 1000} s` : null) };
}

/** The exec's exit code, once the engine has it. */
async function exitCodeOf(exec: Docker.Exec): Promise<number | null> {
  const until = Date.now() + INSPECT_WAIT_MS;
  for (;;) {
    const info = await exec.inspect().catch(() => undefined);
    if (info && !info.Running) return info.ExitCode ?? null;
    if (Date.now() >= until) return null;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Kills the exec's process: the engine has no call for it, so by its process id on the host, and only once
 * that process is known to be in the container's own cgroup (a process id from another namespace is not
 * this agent's to kill). False when it could not be.
 */
async function killExec(exec: Docker.Exec, containerId: string): Promise<boolean> {
  const info = await exec.inspect().catch(() => undefined);
  const pid = info?.Pid;
  if (!info?.Running || pid === undefined || pid <= 0) return info !== undefined && !info.Running;
  const cgroup = await readFile(`/proc/${pid}/cgroup`, 'utf8').catch(() => '');
  if (!cgroup.includes(containerId)) return false;
  try {
    process.kill(pid, 'SIGKILL');
    return true;
  } catch {
    return false;
  }
}
