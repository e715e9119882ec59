import type { ChildProcess } from 'node:child_process';
import type Docker from 'dockerode';

/**
 * SIGKILLs `victim` the moment the engine reports `action` of a container carrying every one of `labels` (`key=value`),
 * and resolves then. With `since` (seconds), events from then on count too: the engine may send its answer's head
 * only with its first event, so the subscription is not awaited before the cut is asked.
 */
export function killAtEngineEvent(docker: Docker, action: string, labels: readonly string[], victim: ChildProcess, since?: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    docker.getEvents({ ...(since === undefined ? {} : { since }), filters: { type: ['container'], event: [action], label: [...labels] } }).then((events) => {
      const stream = events as NodeJS.ReadableStream & { destroy(): void };
      stream.once('data', () => {
        victim.kill('SIGKILL');
        stream.destroy();
        resolve();
      });
    }, reject);
  });
}
