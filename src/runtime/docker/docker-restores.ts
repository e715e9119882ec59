import { posix } from 'node:path';
import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import type { BotDataRestores, FolderArchive, LeftRestore, ScratchRestore } from '../../backups/data-restores.js';
import { messages, NotFound, RuntimeUnavailable, Unprocessable } from '../../errors.js';
import { BOT_LABEL, RESTORE_BEGUN_LABEL, RESTORE_OF_LABEL, RESTORE_START_LABEL, RESTORE_STEP_LABEL, RESTORE_TAG_LABEL } from '../labels.js';
import { engineStatus, translateDockerError } from './docker-errors.js';
import { dataVolumeName, dataVolumesOf } from './docker-volumes.js';

const DEADLINE_MS = 30_000;
/** How long a restore waits for its swap to end. */
const SWAP_WAIT_MS = 60 * 60_000;

/**
 * The swap, run by the engine in a helper container of the bot's own image, as root, with no network: each of the
 * bot's data volumes (`/t/<i>`) emptied and filled with its scratch copy (`/s/<i>`), owners and modes kept. It runs to
 * its end whether or not the agent that started it lives; run again, it gives the same.
 */
const SWAP_SCRIPT = 'set -e; for i in "$@"; do rm -rf /t/$i/* /t/$i/.[!.]* /t/$i/..?*; cp -a /s/$i/. /t/$i/; done';

/**
 * Restores of bots' data on the engine (docs/api.md §20). A restore's scratch volumes are filled through the
 * archive API (`PUT /containers/{id}/archive`) of a helper container that never runs; the swap is one helper
 * container that does. Both carry the restore's labels, so the engine itself is the record an agent killed
 * mid-way is taken up from.
 */
export class DockerDataRestores implements BotDataRestores {
  constructor(private readonly docker: Docker) {}

  async sizes(botId: string): Promise<ReadonlyMap<string, number | undefined>> {
    return new Map((await dataVolumesOf(this.docker, botId)).map((volume) => [volume.path, volume.sizeMb]));
  }

  async scratch(botId: string, archives: readonly FolderArchive[], { tag, startAfter, signal }: { tag: string; startAfter: boolean; signal: AbortSignal }): Promise<ScratchRestore> {
    const image = await this.imageOf(botId);
    const labels = { [RESTORE_OF_LABEL]: botId, [RESTORE_TAG_LABEL]: tag, [RESTORE_BEGUN_LABEL]: new Date().toISOString(), [RESTORE_START_LABEL]: startAfter ? 'true' : 'false' };
    const scratchVolumes = archives.map((_archive, index) => `${botId}-restore-${tag}-${index}`);
    const made = new Restore(this.docker, botId, tag, image, labels, archives, scratchVolumes);
    try {
      for (const name of scratchVolumes) await this.docker.createVolume({ Name: name, Labels: labels, abortSignal: quick(signal) });
      const fill = await this.docker.createContainer({
        name: `${botId}-restore-${tag}`,
        Image: image,
        Entrypoint: ['/bin/sh'],
        Labels: { ...labels, [RESTORE_STEP_LABEL]: 'fill' },
        NetworkDisabled: true,
        HostConfig: { NetworkMode: 'none', Mounts: archives.map((archive, index) => ({ Type: 'volume', Source: scratchVolumes[index], Target: archive.path })) },
        abortSignal: quick(signal),
      } as Docker.ContainerCreateOptions);
      for (const archive of archives) {
        await fill.putArchive(archive.open(), { path: posix.dirname(archive.path), abortSignal: signal });
      }
      made.fill = fill;
      return made;
    } catch (err) {
      await made.discard().catch(() => undefined);
      throw translateDockerError(err, botId);
    }
  }

  async leftovers(): Promise<LeftRestore[]> {
    const containers = await this.docker.listContainers({ all: true, filters: { label: [RESTORE_TAG_LABEL] }, abortSignal: AbortSignal.timeout(DEADLINE_MS) });
    const volumes = (await this.docker.listVolumes({ filters: { label: [RESTORE_TAG_LABEL] }, abortSignal: AbortSignal.timeout(DEADLINE_MS) })).Volumes ?? [];
    const found = new Map<string, LeftRestore>();
    for (const { Labels: labels } of [...containers, ...volumes]) {
      const botId = labels?.[RESTORE_OF_LABEL];
      const tag = labels?.[RESTORE_TAG_LABEL];
      if (botId === undefined || tag === undefined || found.has(tag)) continue;
      const begun = Date.parse(labels?.[RESTORE_BEGUN_LABEL] ?? '');
      found.set(tag, { botId, tag, begunAt: Number.isNaN(begun) ? undefined : new Date(begun), startAfter: labels?.[RESTORE_START_LABEL] === 'true' });
    }
    return [...found.values()];
  }

  async settle({ botId, tag }: LeftRestore): Promise<void> {
    const filters = { label: [`${RESTORE_TAG_LABEL}=${tag}`, `${RESTORE_STEP_LABEL}=swap`] };
    const [swap] = await this.docker.listContainers({ all: true, filters, abortSignal: AbortSignal.timeout(DEADLINE_MS) });
    // A swap begun is carried to its end: the engine runs it on (or runs it again, from its scratch copies); one not begun leaves the data as it was.
    if (swap) await new Restore(this.docker, botId, tag, swap.Image, {}, [], []).finish(swap.Id);
    await removeTagged(this.docker, tag);
  }

  private async imageOf(botId: string): Promise<string> {
    try {
      const info = await this.docker.getContainer(botId).inspect({ abortSignal: AbortSignal.timeout(DEADLINE_MS) });
      if (info.Name !== `/${botId}` || info.Config.Labels?.[BOT_LABEL] !== botId) throw new NotFound(messages.botNotFound(botId));
      return info.Image;
    } catch (err) {
      throw translateDockerError(err, botId);
    }
  }
}

class Restore implements ScratchRestore {
  fill: Docker.Container | undefined;

  constructor(
    private readonly docker: Docker,
    private readonly botId: string,
    private readonly tag: string,
    private readonly image: string,
    private readonly labels: Record<string, string>,
    private readonly archives: readonly FolderArchive[],
    private readonly scratchVolumes: readonly string[],
  ) {}

  async read(path: string, signal: AbortSignal): Promise<Readable> {
    if (!this.fill) throw new Error('the restore was not filled');
    try {
      return (await this.fill.getArchive({ path, abortSignal: signal })) as Readable;
    } catch (err) {
      throw translateDockerError(err, this.botId);
    }
  }

  async swap(signal: AbortSignal): Promise<void> {
    const mounts = this.archives.flatMap((archive, index) => [
      { Type: 'volume' as const, Source: dataVolumeName(this.botId, archive.path), Target: `/t/${index}` },
      { Type: 'volume' as const, Source: this.scratchVolumes[index]!, Target: `/s/${index}`, ReadOnly: true },
    ]);
    const options = {
      name: `${this.botId}-restore-${this.tag}-swap`,
      Image: this.image,
      User: '0:0',
      Entrypoint: ['/bin/sh', '-c', SWAP_SCRIPT, 'swap', ...this.archives.map((_archive, index) => String(index))],
      Cmd: [],
      Labels: { ...this.labels, [RESTORE_STEP_LABEL]: 'swap' },
      NetworkDisabled: true,
      HostConfig: { NetworkMode: 'none', Mounts: mounts },
      abortSignal: quick(signal),
    } as Docker.ContainerCreateOptions;
    // A scratch volume gone (removed by hand) would be made anew, empty, by the create: the bot's data emptied.
    for (const name of this.scratchVolumes) {
      const labels = await this.docker
        .getVolume(name)
        .inspect({ abortSignal: AbortSignal.timeout(DEADLINE_MS) })
        .then((volume) => volume.Labels, (err: unknown) => (engineStatus(err) === 404 ? undefined : Promise.reject(translateDockerError(err, this.botId))));
      if (labels?.[RESTORE_TAG_LABEL] !== this.tag) throw new RuntimeUnavailable(`the restore's scratch volume ${name} is gone from the engine (removed by hand?): nothing of bot ${this.botId}'s data was touched; restore again`);
    }
    const swap = await this.docker.createContainer(options).catch((err: unknown) => Promise.reject(translateDockerError(err, this.botId)));
    try {
      await swap.start({ abortSignal: quick(signal) });
    } catch (err) {
      // A start that failed as the engine began it (a deadline, a busy engine) is carried to its end, never cut.
      const begun = await swap.inspect({ abortSignal: AbortSignal.timeout(DEADLINE_MS) }).then((info) => !info.State.StartedAt.startsWith('0001'), () => false);
      if (begun) return this.finish(swap.id);
      // Not begun: nothing of the bot's data was touched. An image with no /bin/sh cannot run the swap.
      await swap.remove({ force: true }).catch(() => undefined);
      throw new Unprocessable(`bot ${this.botId}'s data could not be restored: the engine could not run the restore's copy in the bot's image (it needs /bin/sh, rm and cp): ${(err as Error).message.slice(0, 300)}`, { cause: err });
    }
    await this.finish(swap.id);
  }

  /**
   * Waits for the swap container to end, as its inspect says (no wait call that a busy engine may answer early);
   * one that failed is run again once (it starts from the scratch copies, not from what it left).
   */
  async finish(id: string): Promise<void> {
    const container = this.docker.getContainer(id);
    for (let attempt = 0; ; attempt++) {
      let info = await container.inspect({ abortSignal: AbortSignal.timeout(DEADLINE_MS) });
      const giveUpAt = Date.now() + SWAP_WAIT_MS;
      while (info.State.Running || info.State.Restarting) {
        // The engine runs it on; the agent stops waiting (the restore answers its failure, the next agent settles it).
        if (Date.now() > giveUpAt) throw new Error(`the restore's copy into bot ${this.botId}'s data ran past ${SWAP_WAIT_MS / 60_000} minutes`);
        await new Promise((resolve) => setTimeout(resolve, 200));
        info = await container.inspect({ abortSignal: AbortSignal.timeout(DEADLINE_MS) });
      }
      const begun = !info.State.StartedAt.startsWith('0001');
      if (begun && info.State.Status === 'exited' && info.State.ExitCode === 0) return;
      if (begun && attempt > 0) {
        const output = (await container.logs({ stdout: true, stderr: true, tail: 20, abortSignal: AbortSignal.timeout(DEADLINE_MS) }).catch(() => Buffer.alloc(0))) as Buffer;
        throw new Error(`the restore's copy into bot ${this.botId}'s data failed (exit ${info.State.ExitCode}): ${output.toString('latin1').replace(/[^\x20-\x7e\n]/g, '').slice(-500)}`);
      }
      await container.start({ abortSignal: AbortSignal.timeout(DEADLINE_MS) });
    }
  }

  async discard(): Promise<void> {
    await removeTagged(this.docker, this.tag);
  }
}

/** The restore's signal, and the engine's deadline for a call that moves no data: a silent engine holds no restore for its hour. */
function quick(signal: AbortSignal): AbortSignal {
  return AbortSignal.any([signal, AbortSignal.timeout(DEADLINE_MS)]);
}

/** Removes the restore's helper containers, then its scratch volumes; those gone already, or going (another agent, or the engine, removing them), are no failure. */
async function removeTagged(docker: Docker, tag: string): Promise<void> {
  const filters = { label: [`${RESTORE_TAG_LABEL}=${tag}`] };
  for (const container of await docker.listContainers({ all: true, filters, abortSignal: AbortSignal.timeout(DEADLINE_MS) })) {
    await docker
      .getContainer(container.Id)
      .remove({ force: true, v: false, abortSignal: AbortSignal.timeout(DEADLINE_MS) })
      .catch((err: unknown) => {
        if (engineStatus(err) !== 404 && !(engineStatus(err) === 409 && /already in progress/.test(String((err as Error).message)))) throw err;
      });
  }
  for (const volume of (await docker.listVolumes({ filters, abortSignal: AbortSignal.timeout(DEADLINE_MS) })).Volumes ?? []) {
    // A volume whose container's removal is still under way is in use a moment longer.
    for (let attempt = 0; ; attempt++) {
      const removed = await docker
        .getVolume(volume.Name)
        .remove({ abortSignal: AbortSignal.timeout(DEADLINE_MS) })
        .then(
          () => true,
          (err: unknown) => {
            if (engineStatus(err) === 404) return true;
            if (engineStatus(err) === 409 && attempt < 50) return false;
            throw err;
          },
        );
      if (removed) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}
