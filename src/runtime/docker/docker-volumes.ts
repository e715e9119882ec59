import type Docker from 'dockerode';
import { dataFolderKey } from '../../data/bot-data.js';
import type { BotDataFolder } from '../../data/bot-data.js';
import type { DataUse } from '../../data/data-usage.js';
import { Unprocessable } from '../../errors.js';
import { BOT_LABEL, DATA_PATH_LABEL, DATA_SIZE_LABEL } from '../labels.js';
import { engineStatus } from './docker-errors.js';

const DEADLINE_MS = 30_000;

/**
 * The named volume that holds one data folder of a bot (docs/api.md §19): the bot's id and a digest of the folder's
 * path, so a create of the bot with that folder again finds it, and no two folders share one.
 */
export function dataVolumeName(botId: string, path: string): string {
  return `${botId}-data-${dataFolderKey(path)}`;
}

/** The bot's data folders among a container's mounts: those of its own data volumes, by path. */
export function dataFoldersOf(botId: string, mounts: readonly { Type: string; Name?: string | undefined; Destination: string }[]): string[] {
  return mounts
    .filter((mount) => mount.Type === 'volume' && mount.Name === dataVolumeName(botId, mount.Destination))
    .map((mount) => mount.Destination)
    .sort();
}

/** The volumes a create mounts, and those of them it made (which a failed create removes: docs/api.md §19). */
export interface PreparedVolumes {
  readonly mounts: Docker.MountSettings[];
  readonly made: readonly string[];
}

/**
 * Makes the bot's data volumes that are not there yet, labelled with the bot and its folder; one that is there
 * already (kept by a removal with keep_data) is taken up as it is, with its files. Unprocessable for a volume of
 * that name that is not this bot's folder.
 */
export async function prepareDataVolumes(docker: Docker, botId: string, folders: readonly BotDataFolder[]): Promise<PreparedVolumes> {
  const mounts: Docker.MountSettings[] = [];
  const made: string[] = [];
  try {
    for (const folder of folders) {
      const name = dataVolumeName(botId, folder.path);
      const found = await volumeLabels(docker, name);
      if (found === undefined) {
        await docker.createVolume({
          Name: name,
          Labels: { [BOT_LABEL]: botId, [DATA_PATH_LABEL]: folder.path, ...(folder.sizeMb === undefined ? {} : { [DATA_SIZE_LABEL]: String(folder.sizeMb) }) },
          abortSignal: AbortSignal.timeout(DEADLINE_MS),
        });
        made.push(name);
      } else if (found[BOT_LABEL] !== botId || found[DATA_PATH_LABEL] !== folder.path) {
        throw new Unprocessable(`volume ${name} exists on the engine and is not bot ${botId}'s data folder ${folder.path}: it is not taken over`);
      }
      mounts.push({ Type: 'volume', Source: name, Target: folder.path });
    }
  } catch (err) {
    await removeVolumes(docker, made).catch(() => undefined);
    throw err;
  }
  return { mounts, made };
}

/** The labels of the volume, or undefined when there is none of that name. */
async function volumeLabels(docker: Docker, name: string): Promise<Record<string, string> | undefined> {
  try {
    const info = await docker.getVolume(name).inspect({ abortSignal: AbortSignal.timeout(DEADLINE_MS) });
    return info.Labels ?? {};
  } catch (err) {
    if (engineStatus(err) === 404) return undefined;
    throw err;
  }
}

/** A bot's data volume as the engine lists it: its name and folder. */
export interface DataVolume {
  readonly name: string;
  readonly path: string;
  readonly sizeMb: number | undefined;
}

/** Every data volume labelled with the bot, by folder. */
export async function dataVolumesOf(docker: Docker, botId: string): Promise<DataVolume[]> {
  const listed = await docker.listVolumes({ filters: { label: [`${BOT_LABEL}=${botId}`] }, abortSignal: AbortSignal.timeout(DEADLINE_MS) });
  return (listed.Volumes ?? [])
    .filter((volume) => volume.Labels?.[DATA_PATH_LABEL] !== undefined && volume.Name === dataVolumeName(botId, volume.Labels[DATA_PATH_LABEL]))
    .map((volume) => ({ name: volume.Name, path: volume.Labels[DATA_PATH_LABEL] ?? '', sizeMb: sizeLabel(volume.Labels[DATA_SIZE_LABEL]) }))
    .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

function sizeLabel(value: string | undefined): number | undefined {
  return value !== undefined && /^\d{1,7}$/.test(value) ? Number(value) : undefined;
}

/** Removes the volumes; one already gone is no failure. */
export async function removeVolumes(docker: Docker, names: readonly string[]): Promise<void> {
  for (const name of names) {
    await docker
      .getVolume(name)
      .remove({ abortSignal: AbortSignal.timeout(DEADLINE_MS) })
      .catch((err: unknown) => {
        if (engineStatus(err) !== 404) throw err;
      });
  }
}

/**
 * Every bot's data volume with the bytes it uses, as the engine's disk usage (`GET /system/df`) says: one walk of
 * the engine's volumes for all bots. A volume the engine could not measure is left out.
 */
export async function measureDataVolumes(docker: Docker): Promise<DataUse[]> {
  // dockerode's df sends no query: asked through its modem as df itself asks, with `type=volume`, which engines of
  // API 1.42 and later take to measure volumes alone (older ones measure everything, and answer the same).
  const usage = await new Promise<{ Volumes?: Array<{ Name: string; Labels: Record<string, string> | null; UsageData?: { Size: number } | null }> | null }>((resolve, reject) =>
    docker.modem.dial(
      { path: '/system/df?', method: 'GET', options: { type: 'volume' }, abortSignal: AbortSignal.timeout(5 * DEADLINE_MS), statusCodes: { 200: true, 400: 'bad parameter', 500: 'server error' } },
      (err, data) => (err ? reject(err) : resolve(data as never)),
    ),
  );
  const uses: DataUse[] = [];
  for (const volume of usage.Volumes ?? []) {
    const botId = volume.Labels?.[BOT_LABEL];
    const path = volume.Labels?.[DATA_PATH_LABEL];
    const bytes = volume.UsageData?.Size ?? -1;
    if (botId === undefined || path === undefined || volume.Name !== dataVolumeName(botId, path) || bytes < 0) continue;
    uses.push({ botId, path, sizeMb: sizeLabel(volume.Labels?.[DATA_SIZE_LABEL]), bytes });
  }
  return uses;
}
