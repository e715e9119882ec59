import { AlreadyExists, StorageFull, Unprocessable } from '../errors.js';
import type { Backup, BackupMode } from './backup-folder.js';
import type { BackupFolder } from './backup-folder.js';
import type { BotDataArchives } from './data-archives.js';
import type { RetentionPolicy } from './retention.js';

/** How long one folder's archive may take to read, at most. */
const READ_DEADLINE_MS = 30 * 60_000;

/** What a backup in `stop` mode stops and starts the bot through: the agent's own lifecycle, in turn with every other operation. */
export interface BackupPower {
  running(botId: string): Promise<boolean>;
  stop(botId: string): Promise<unknown>;
  start(botId: string): Promise<unknown>;
}

/**
 * Backups of bots' data to the agent's backup folder (docs/api.md §20): one at a time per bot, each made
 * consistent as asked (`stop`: the bot stopped while it is copied and started again, the downtime measured;
 * `live`: copied as it runs).
 */
export class Backups {
  private readonly underWay = new Set<string>();

  constructor(
    private readonly archives: BotDataArchives,
    readonly folder: BackupFolder,
    private readonly power: BackupPower,
  ) {}

  /** A backup of the bot now; with `keep`, the bot's backups that policy does not keep are removed once it is made. */
  async take(botId: string, mode: BackupMode, keep?: RetentionPolicy): Promise<{ backup: Backup; removed: string[] }> {
    const backup = await this.make(botId, mode);
    return { backup, removed: keep ? await this.folder.prune(botId, keep) : [] };
  }

  private async make(botId: string, mode: BackupMode): Promise<Backup> {
    const folders = await this.archives.folders(botId);
    if (folders.length === 0) throw new Unprocessable(`bot ${botId} has no data folders to back up: a bot's data folders are named on its create (docs/api.md §19)`);
    if (this.underWay.has(botId)) throw new AlreadyExists(`a backup of bot ${botId} is under way: wait for it to end`);
    this.underWay.add(botId);
    try {
      const stopped = mode === 'stop' && (await this.power.running(botId));
      let stoppedAt: number | undefined;
      let downtimeMs: number | null = null;
      const startAgain = async () => {
        if (stoppedAt === undefined || downtimeMs !== null) return;
        try {
          await this.power.start(botId);
        } finally {
          downtimeMs = Date.now() - stoppedAt;
        }
      };
      try {
        if (stopped) {
          stoppedAt = Date.now();
          await this.power.stop(botId);
        }
        return await this.folder.write(
          botId,
          folders,
          (path) => this.archives.read(botId, path, AbortSignal.timeout(READ_DEADLINE_MS)),
          // Started again once copied, before the manifest is written: its downtime is the copy's, not the disk's flush.
          async () => {
            await startAgain();
            return { mode, downtime_ms: mode === 'stop' ? (downtimeMs ?? 0) : null };
          },
        );
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOSPC') throw new StorageFull(`the backup of bot ${botId} failed: the disk of the agent's backup folder is full; nothing of it was kept`, { cause: err });
        throw err;
      } finally {
        // A copy (or a stop) that failed: the bot runs again all the same.
        await startAgain();
      }
    } finally {
      this.underWay.delete(botId);
    }
  }
}

/** What a backup's answer (and a scheduled backup's run) says of it. */
export function backupMade(backup: Backup, removed: readonly string[]): string {
  const downtime = backup.downtime_ms === null ? '' : `, the bot stopped ${backup.downtime_ms} ms for it`;
  const pruned = removed.length === 0 ? '' : `; retention removed ${removed.length} older backup(s)`;
  return `backup ${backup.id} of bot ${backup.bot_id} made: ${backup.folders.length} folder(s), ${backup.size_bytes} bytes${downtime}${pruned}`;
}
