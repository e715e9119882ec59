import type { Readable } from 'node:stream';
import { manifestOf } from '../backups/backup-folder.js';
import type { Backup } from '../backups/backup-folder.js';
import type { Backups } from '../backups/backups.js';
import { AgentError, NodeAway, Unprocessable } from '../errors.js';
import { boundedJson, fleetRequest, reasonOf } from './fleet-client.js';
import { addressToCall, urlOnNode } from './node-beacon.js';
import type { NodeBeacon } from './node-beacon.js';

/** How long the new node has to take in a moved bot's data: its archives fetched and restored (docs/api.md §17). */
export const DATA_CARRY_MS = 60 * 60_000;
/** How long the old node has to answer a manifest, and the most of it read. */
const MANIFEST_DEADLINE_MS = 60_000;
const MANIFEST_MAX_BYTES = 256 * 1024;

export interface DataIntakeDeps {
  readonly fleetKey: string | undefined;
  readonly nodes: Pick<NodeBeacon, 'nodeNamed'>;
  /** Undefined where this agent keeps no backups (AGENT_DATA_DIR=:memory:): it takes in no bot's data. */
  readonly backups: Pick<Backups, 'takeIn'> | undefined;
}

/**
 * The new node's part of a move that carries data (docs/api.md §17): the backup the old node made of the stopped
 * bot, read from that node's agent with the fleet's key (its manifest, then each archive, streamed to this agent's
 * folder and bounded by the sizes the manifest says), then restored into the bot made here, stopped, as any
 * restore is: its SHA-256 and every entry checked, unpacked beside the bot, read back, swapped in.
 */
export async function takeInData({ fleetKey, nodes, backups }: DataIntakeDeps, botId: string, from: string, backupId: string): Promise<Backup> {
  if (!backups) throw new Unprocessable(`this agent keeps no backups (AGENT_DATA_DIR=:memory:), so it takes in no bot's data: bot ${botId} is not moved here`);
  const source = await nodes.nodeNamed(from);
  if (source === undefined || fleetKey === undefined) throw new Unprocessable(`node ${from} is not one of the fleet's`);
  const address = addressToCall(source, `bot ${botId}'s data is not taken in`);
  const path = `/api/admin/bots/${botId}/backups/${backupId}`;
  const fromSource = async <T>(what: string, read: () => Promise<T>): Promise<T> => {
    try {
      return await read();
    } catch (err) {
      if (err instanceof AgentError) throw err;
      throw new NodeAway(`node ${from} did not give ${what} of bot ${botId}: ${reasonOf(err)}`, { cause: err });
    }
  };
  const manifest = await fromSource('the manifest of its backup', async () => {
    const answer = await fleetRequest(urlOnNode(address, path), fleetKey, { signal: AbortSignal.timeout(MANIFEST_DEADLINE_MS) });
    const body = (await boundedJson(answer.body, MANIFEST_MAX_BYTES)) as { backup?: unknown } | null;
    if (answer.statusCode !== 200) throw new Error(`it answered ${answer.statusCode}`);
    const backup = manifestOf(body?.backup, botId, backupId);
    if (!backup) throw new Error('its manifest is not one of a backup of the bot');
    return backup;
  });
  const open = (file: string): Promise<Readable> =>
    fromSource(`its archive ${file}`, async () => {
      const folder = manifest.folders.find((kept) => kept.file === file)!;
      const answer = await fleetRequest(urlOnNode(address, `${path}/archive`, `folder=${encodeURIComponent(folder.path)}`), fleetKey, { signal: AbortSignal.timeout(DATA_CARRY_MS) });
      if (answer.statusCode !== 200) {
        await answer.body.dump();
        throw new Error(`it answered ${answer.statusCode}`);
      }
      return answer.body as unknown as Readable;
    });
  // An archive cut off as it is read (the old node gone) fails as that node's.
  return fromSource('its data whole', () => backups.takeIn(manifest, open));
}
