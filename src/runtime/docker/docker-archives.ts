import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import type { BotDataArchives } from '../../backups/data-archives.js';
import { messages, NotFound } from '../../errors.js';
import { BOT_LABEL } from '../labels.js';
import { translateDockerError } from './docker-errors.js';
import { dataFoldersOf, measureDataVolumes } from './docker-volumes.js';
import type { DataUse } from '../../data/data-usage.js';

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
      return dataFoldersOf(botId, info.Mounts ?? []);
    } catch (err) {
      throw translateDockerError(err, botId);
    }
  }

  usage(): Promise<readonly DataUse[]> {
    return measureDataVolumes(this.docker);
  }

  async read(botId: string, path: string, signal: AbortSignal): Promise<Readable> {
    try {
      return (await this.docker.getContainer(botId).getArchive({ path, abortSignal: signal })) as Readable;
    } catch (err) {
      throw translateDockerError(err, botId);
    }
  }
}
