import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import type { BotDataArchives } from '../../backups/data-archives.js';
import { messages, NotFound } from '../../errors.js';
import { BOT_LABEL } from '../labels.js';
import { translateDockerError } from './docker-errors.js';
import { dataVolumeName } from './docker-volumes.js';

const INSPECT_DEADLINE_MS = 30_000;

/**
 * A bot's data folders on the engine (docs/api.md §19, §20): its container's mounts of its own data volumes,
 * each read through the engine's archive API (`GET /containers/{id}/archive`), running or stopped.
 */
export class DockerDataArchives implements BotDataArchives {
  constructor(private readonly docker: Docker) {}

  async folders(botId: string): Promise<readonly string[]> {
    try {
      const info = await this.docker.getContainer(botId).inspect({ abortSignal: AbortSignal.timeout(INSPECT_DEADLINE_MS) });
      if (info.Name !== `/${botId}` || info.Config.Labels?.[BOT_LABEL] !== botId) throw new NotFound(messages.botNotFound(botId));
      return (info.Mounts ?? [])
        .filter((mount) => mount.Type === 'volume' && mount.Name === dataVolumeName(botId, mount.Destination))
        .map((mount) => mount.Destination)
        .sort();
    } catch (err) {
      throw translateDockerError(err, botId);
    }
  }

  async read(botId: string, path: string, signal: AbortSignal): Promise<Readable> {
    try {
      return (await this.docker.getContainer(botId).getArchive({ path, abortSignal: signal })) as Readable;
    } catch (err) {
      throw translateDockerError(err, botId);
    }
  }
}
