import type Docker from 'dockerode';
import { PullTooSlow } from '../../errors.js';
import type { AgentError } from '../../errors.js';
import { pullFailure } from '../pull-failure.js';
import { registryOf } from '../../provisioning/image-reference.js';
import type { RegistryLogin } from '../../provisioning/registry-credentials.js';
import type { PullProgress } from '../../provisioning/provisioner.js';
import { engineDetail, engineStatus, translateDockerError } from './docker-errors.js';
import { eachJsonLine } from './json-lines.js';

/** One line of the engine's pull stream. */
interface PullLine {
  readonly id?: string;
  readonly status?: string;
  readonly progressDetail?: { readonly current?: number; readonly total?: number };
  readonly error?: string;
  readonly errorDetail?: { readonly message?: string };
}

/**
 * Pulls `image` into the engine (docs/api.md §14), with `login` where the registry wants one, within
 * `deadlineMs`; `onProgress` hears each change of the downloaded bytes. Throws the error of docs/api.md §14
 * for each way a pull fails, with the engine's (registry's) own words.
 */
export async function pullImage(
  engine: Docker,
  image: string,
  login: RegistryLogin | undefined,
  deadlineMs: number,
  onProgress: (progress: PullProgress) => void,
): Promise<void> {
  const deadline = AbortSignal.timeout(deadlineMs);
  const tooSlow = (): PullTooSlow => new PullTooSlow(`pull of image ${image} took longer than ${deadlineMs / 1000} s (AGENT_PULL_TIMEOUT_S); it was abandoned`);
  const authconfig = login && { username: login.username, password: login.password, serveraddress: registryOf(image) };
  let stream: NodeJS.ReadableStream;
  try {
    stream = (await engine.pull(image, { abortSignal: deadline, authconfig })) as NodeJS.ReadableStream;
  } catch (err) {
    if (deadline.aborted) throw tooSlow();
    const status = engineStatus(err);
    if (status === undefined) throw translateDockerError(err, undefined);
    throw pullFailure(image, streamRefusal(err), status);
  }
  const layers = new Map<string, { current: number; total: number }>();
  await new Promise<void>((resolve, reject) => {
    let failure: AgentError | undefined;
    const onAbort = (): void => {
      reject(tooSlow());
      (stream as NodeJS.ReadableStream & { destroy?: () => void }).destroy?.();
    };
    deadline.addEventListener('abort', onAbort, { once: true });
    eachJsonLine<PullLine>(
      stream,
      (line) => {
        if (line.error !== undefined) {
          failure ??= pullFailure(image, line.errorDetail?.message ?? line.error, undefined);
          return;
        }
        if (line.id === undefined || line.status === undefined) return;
        const layer = layers.get(line.id) ?? { current: 0, total: 0 };
        if (line.status === 'Downloading' && line.progressDetail?.total) {
          layer.total = line.progressDetail.total;
          layer.current = line.progressDetail.current ?? layer.current;
        } else if (line.status === 'Download complete' || line.status === 'Already exists') {
          layer.current = layer.total;
        } else {
          return;
        }
        layers.set(line.id, layer);
        let bytes = 0;
        let totalBytes = 0;
        for (const { current, total } of layers.values()) {
          bytes += current;
          totalBytes += total;
        }
        onProgress({ bytes, totalBytes });
      },
      () => undefined,
    );
    stream.on('end', () => {
      deadline.removeEventListener('abort', onAbort);
      if (failure) reject(failure);
      else resolve();
    });
    stream.on('error', (err: unknown) => {
      deadline.removeEventListener('abort', onAbort);
      reject(deadline.aborted ? tooSlow() : translateDockerError(err, undefined));
    });
  });
}

/** The engine's words for a refused streaming call: docker-modem puts them in its message, after `(HTTP code N) reason - `. */
function streamRefusal(err: unknown): string {
  const message = (err as { message?: unknown }).message;
  const words = typeof message === 'string' ? message.replace(/^\(HTTP code \d+\) [^-]*- /, '').trim() : '';
  return words || engineDetail(err);
}
