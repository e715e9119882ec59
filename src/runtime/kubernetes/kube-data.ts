import type { CoreV1Api, V1Deployment, V1PersistentVolumeClaim, V1PodTemplateSpec, V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import { dataFolderKey } from '../../data/bot-data.js';
import type { BotDataFolder } from '../../data/bot-data.js';
import { Unprocessable } from '../../errors.js';
import { BOT_LABEL } from '../labels.js';
import { withDeadline } from './kube-deadline.js';
import { apiStatus } from './kube-errors.js';

/**
 * A bot's data on Kubernetes (docs/api.md §19): one PersistentVolumeClaim per bot beside its Deployment,
 * `<name>-data`, each folder a subPath of it named by its path's digest, so that a create of the bot with that
 * folder again finds its files, and no two folders share one.
 */
const DATA_VOLUME = 'bot-data';
/** A claim's size where no folder names one: the storage request a claim must have. */
export const DEFAULT_CLAIM_MB = 1024;

export const claimNameOf = (objectName: string): string => `${objectName}-data`;

/** What the claim asks of the cluster's storage: every folder's size_mb together, or the default. */
function claimSize(folders: readonly BotDataFolder[]): string {
  const asked = folders.map((folder) => folder.sizeMb);
  return `${asked.every((size) => size !== undefined) ? asked.reduce((sum, size) => sum + size, 0) : DEFAULT_CLAIM_MB}Mi`;
}

/**
 * Makes the bot's claim, or takes up the one a removal with keep_data left; answers whether it made it (a failed
 * create removes only what it made). Unprocessable for a claim of that name that is not this bot's.
 */
export async function claimData(core: CoreV1Api, namespace: string, botId: string, name: string, folders: readonly BotDataFolder[]): Promise<boolean> {
  const body: V1PersistentVolumeClaim = {
    metadata: { name, labels: { [BOT_LABEL]: botId } },
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: claimSize(folders) } } },
  };
  try {
    await core.createNamespacedPersistentVolumeClaim({ namespace, body }, withDeadline());
    return true;
  } catch (err) {
    if (apiStatus(err) !== 409) throw err;
  }
  const found = await core.readNamespacedPersistentVolumeClaim({ name, namespace }, withDeadline());
  if (found.metadata?.labels?.[BOT_LABEL] !== botId || found.metadata.deletionTimestamp) {
    throw new Unprocessable(`claim ${name} exists in the namespace and is not bot ${botId}'s data: it is not taken over`);
  }
  return false;
}

/** Removes the bot's claim; one that is not there is no failure. */
export async function removeClaim(core: CoreV1Api, namespace: string, name: string): Promise<void> {
  await core.deleteNamespacedPersistentVolumeClaim({ name, namespace }, withDeadline()).catch((err: unknown) => {
    if (apiStatus(err) !== 404) throw err;
  });
}

/** The pod's volume of the claim, and the container's mount of each folder. */
export function dataMounts(claim: string, folders: readonly BotDataFolder[]): { volumes: V1Volume[]; mounts: V1VolumeMount[] } {
  if (folders.length === 0) return { volumes: [], mounts: [] };
  return {
    volumes: [{ name: DATA_VOLUME, persistentVolumeClaim: { claimName: claim } }],
    mounts: folders.map((folder) => ({ name: DATA_VOLUME, mountPath: folder.path, subPath: dataFolderKey(folder.path) })),
  };
}

/** The Deployment's annotation of each data folder's size_mb, by path (docs/api.md §19): the bound of its use and of a restore. */
export const DATA_SIZES_ANNOTATION = 'bot-agent/data-sizes';

/** Each folder's size_mb as the Deployment's annotation says; none for a folder it does not name (or a bot made before it). */
export function dataSizesOf(deployment: V1Deployment): ReadonlyMap<string, number | undefined> {
  let asked: Record<string, unknown> = {};
  try {
    asked = JSON.parse(deployment.metadata?.annotations?.[DATA_SIZES_ANNOTATION] ?? '{}') as Record<string, unknown>;
  } catch {
    // Written by the agent; one changed by hand bounds nothing.
  }
  return new Map(dataFoldersOf(deployment.spec?.template).map((path) => [path, typeof asked[path] === 'number' ? asked[path] : undefined]));
}

/** The bot's data folders as its pod template mounts them. */
export function dataFoldersOf(template: V1PodTemplateSpec | undefined): string[] {
  const mounts = template?.spec?.containers[0]?.volumeMounts ?? [];
  return mounts
    .filter((mount) => mount.name === DATA_VOLUME)
    .map((mount) => mount.mountPath)
    .sort();
}
