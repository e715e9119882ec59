import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { dataPathProblem } from '../data/bot-data.js';
import { retainedIds } from './retention.js';
import type { RetentionPolicy } from './retention.js';
import { syncDir, writeDurably } from '../durable-file.js';

/** How a backup was made consistent (docs/api.md §20). */
export type BackupMode = 'stop' | 'live' | 'pre';

/** What a backup's `pre` command did in the bot before its folders were copied (docs/api.md §20). */
export interface PreCommandRun {
  readonly command: readonly string[];
  readonly exit_code: number | null;
  /** Its standard output and error, at most PRE_OUTPUT_BYTES as answered in JSON. */
  readonly output: string;
  readonly output_truncated: boolean;
}

/** The most of a pre command's output a backup keeps. */
export const PRE_OUTPUT_BYTES = 4_096;

/** One data folder of a backup: its archive's size and SHA-256 (of the compressed bytes, as stored). */
export interface BackedUpFolder {
  readonly path: string;
  readonly file: string;
  readonly size_bytes: number;
  readonly sha256: string;
}

/** The last verification of a backup (docs/api.md §20): when, whether it read back whole, and if not, why. */
export interface Verification {
  readonly at: string;
  readonly ok: boolean;
  readonly message?: string;
}

/** A backup's copy to a store (docs/api.md §20): which, when, whether it was made whole. */
export interface StoreCopy {
  readonly store: string;
  readonly at: string;
  readonly ok: boolean;
  readonly message?: string;
}

/** A backup as its manifest keeps it, and as it is answered. */
export interface Backup {
  readonly id: string;
  readonly bot_id: string;
  readonly created_at: string;
  readonly mode: BackupMode;
  /** How long the bot was stopped for it (stop mode), ms; null for a live one. */
  readonly downtime_ms: number | null;
  /** Mode `pre`: what its command did. */
  readonly pre?: PreCommandRun;
  readonly size_bytes: number;
  readonly folders: readonly BackedUpFolder[];
  /** A locked backup is never removed, by retention or by hand, until it is unlocked. */
  readonly locked: boolean;
  /** Its last verification; null until one is made. */
  readonly verification: Verification | null;
  /** Its copies to stores, as they were made. */
  readonly copies: readonly StoreCopy[];
}

const MANIFEST = 'backup.json';
/** Where the bots a backup stopped are marked, and the restores under way (a bot id never begins with a dot). */
const STOPPED = '.stopped-for-backup';
const RESTORING = '.restoring';
/** A backup being made: never listed; one a SIGKILL left is removed when the bot's backups are next read. */
const PARTIAL = '.partial-';
export const BACKUP_ID = /^bak_[0-9]{8}T[0-9]{6}Z_[0-9a-f]{8}$/;
/** A backup store's name (AGENT_BACKUP_STORES). */
export const STORE_NAME = /^[a-z0-9][a-z0-9-]{0,31}$/;

/**
 * A manifest read from elsewhere (a store, another node) as the agent's own, unlocked and unverified here; undefined
 * for one naming another bot, another id, or files not as the agent writes them.
 */
export function manifestOf(read: unknown, botId: string, id: string): Backup | undefined {
  const backup = read as Backup | null;
  const ours = (folder: Backup['folders'][number], index: number) =>
    folder.file === `folder-${index}.tar.gz` && typeof folder.path === 'string' && dataPathProblem(folder.path) === undefined && /^[0-9a-f]{64}$/.test(String(folder.sha256)) && Number.isSafeInteger(folder.size_bytes);
  if (typeof backup !== 'object' || backup === null || backup.bot_id !== botId || backup.id !== id || !Array.isArray(backup.folders) || !backup.folders.every(ours)) return undefined;
  const { pre, ...rest } = backup;
  return { ...rest, ...(preRunOf(pre) ? { pre: preRunOf(pre) } : {}), locked: false, verification: null };
}

/** A pre command's record as read from elsewhere, only when it has the shape the agent writes (and its bound). */
function preRunOf(read: unknown): PreCommandRun | undefined {
  const pre = read as PreCommandRun | undefined;
  if (typeof pre !== 'object' || pre === null || !Array.isArray(pre.command) || !pre.command.every((arg) => typeof arg === 'string')) return undefined;
  if (typeof pre.output !== 'string' || pre.output.length > PRE_OUTPUT_BYTES || typeof pre.output_truncated !== 'boolean') return undefined;
  if (pre.exit_code !== null && !Number.isSafeInteger(pre.exit_code)) return undefined;
  return { command: pre.command, exit_code: pre.exit_code, output: pre.output, output_truncated: pre.output_truncated };
}

/** Backups newest first by when each began, to the millisecond: two ids of one second sort by their random part. */
export function newestFirst(a: Backup, b: Backup): number {
  return Date.parse(b.created_at) - Date.parse(a.created_at) || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);
}

/** The id of a backup made at `at`: its time first, so ids sort as the backups were made. */
function newBackupId(at: Date): string {
  return `bak_${at.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '')}_${randomBytes(4).toString('hex')}`;
}

/**
 * The agent's own backup folder (docs/api.md §20): `<AGENT_DATA_DIR>/backups/<bot_id>/<backup_id>/`, one
 * gzip-compressed tar per data folder and a manifest. A backup is made in a folder of its own under a partial
 * name and renamed into place once every byte and its manifest are on disk (fsynced): a backup is listed
 * whole or not at all, whatever moment the agent is killed at.
 */
export class BackupFolder {
  constructor(private readonly root: string) {}

  private botDir(botId: string): string {
    return join(this.root, botId);
  }

  /**
   * Makes a backup of the bot: `folders` are read one after another through `read`, each streamed through gzip
   * and a SHA-256 to its file. Nothing of it is kept when any fails (or `copied` throws).
   */
  async write(
    botId: string,
    folders: readonly string[],
    read: (path: string) => Promise<Readable>,
    /** Called once every folder is copied, before the manifest: how the backup was made. */
    copied: () => Promise<Pick<Backup, 'mode' | 'downtime_ms' | 'pre'>>,
    at = new Date(),
  ): Promise<Backup> {
    const id = newBackupId(at);
    const dir = this.botDir(botId);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const partial = join(dir, `${PARTIAL}${id}`);
    await mkdir(partial, { mode: 0o700 });
    try {
      const written: BackedUpFolder[] = [];
      for (const [index, path] of folders.entries()) {
        const file = `folder-${index}.tar.gz`;
        written.push({ path, file, ...(await writeCompressed(await read(path), join(partial, file))) });
      }
      const how = await copied();
      const backup: Backup = {
        id,
        bot_id: botId,
        created_at: at.toISOString(),
        ...how,
        size_bytes: written.reduce((sum, folder) => sum + folder.size_bytes, 0),
        folders: written,
        locked: false,
        verification: null,
        copies: [],
      };
      await writeDurably(join(partial, MANIFEST), `${JSON.stringify(backup)}\n`);
      await syncDir(partial);
      await rename(partial, join(dir, id));
      await syncDir(dir);
      return backup;
    } catch (err) {
      await rm(partial, { recursive: true, force: true });
      throw err;
    }
  }

  /**
   * Marks the bot as stopped for a backup, on disk before it is stopped: an agent killed before it started the bot
   * again leaves the mark, and the next starts the bot (`stoppedForBackups`). Unmarked once it runs again.
   */
  async markStopped(botId: string): Promise<void> {
    await this.mark(STOPPED, botId);
  }

  async unmarkStopped(botId: string): Promise<void> {
    await rm(join(this.root, STOPPED, botId), { force: true });
  }

  /** The bots a backup stopped and nothing started again (an agent killed mid-backup). */
  async stoppedForBackups(): Promise<string[]> {
    return this.marked(STOPPED);
  }

  /**
   * Marks a restore (or verification) as this folder's, on disk before the runtime holds anything of it: the
   * agent that starts next with this folder knows the restores it finds on the runtime with a mark were left by
   * a killed agent, not under way in another one. Unmarked once the runtime holds nothing of it.
   */
  async markRestore(tag: string, botId: string): Promise<void> {
    await this.mark(RESTORING, tag, botId);
  }

  async unmarkRestore(tag: string): Promise<void> {
    await rm(join(this.root, RESTORING, tag), { force: true });
  }

  /** The restores marked, by tag: the bot of each (an empty one a mark torn by a SIGKILL as it was written). */
  async restoresMarked(): Promise<Map<string, string>> {
    const marks = new Map<string, string>();
    for (const tag of await this.marked(RESTORING)) marks.set(tag, (await readFile(join(this.root, RESTORING, tag), 'utf8').catch(() => '')).trim());
    return marks;
  }

  private async mark(kind: string, name: string, content = new Date().toISOString()): Promise<void> {
    await mkdir(join(this.root, kind), { recursive: true, mode: 0o700 });
    const mark = join(this.root, kind, name);
    await rm(mark, { force: true });
    await writeDurably(mark, `${content}\n`);
    await syncDir(join(this.root, kind));
  }

  private async marked(kind: string): Promise<string[]> {
    return readdir(join(this.root, kind)).catch((err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? [] : Promise.reject(err)));
  }

  /** The bot's backups, newest first; partial ones (a SIGKILL mid-backup) are removed as they are found. */
  async list(botId: string): Promise<Backup[]> {
    const dir = this.botDir(botId);
    const names = await readdir(dir).catch((err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? [] : Promise.reject(err)));
    const backups: Backup[] = [];
    for (const name of names) {
      if (name.startsWith(PARTIAL)) {
        await rm(join(dir, name), { recursive: true, force: true });
        continue;
      }
      if (!BACKUP_ID.test(name)) continue;
      const backup = await this.get(botId, name);
      if (backup) backups.push(backup);
    }
    return backups.sort(newestFirst);
  }

  /** The backup, or undefined when the bot has none of that id. */
  async get(botId: string, id: string): Promise<Backup | undefined> {
    if (!BACKUP_ID.test(id)) return undefined;
    try {
      const kept = JSON.parse(await readFile(join(this.botDir(botId), id, MANIFEST), 'utf8')) as Backup;
      return { ...kept, locked: kept.locked === true, verification: kept.verification ?? null, copies: kept.copies ?? [] };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  /** One folder's archive of the backup, as stored (gzip-compressed tar), and its size. */
  async open(backup: Backup, folder: BackedUpFolder): Promise<{ stream: Readable; size: number }> {
    const path = join(this.botDir(backup.bot_id), backup.id, folder.file);
    const { size } = await stat(path);
    return { stream: createReadStream(path), size };
  }

  /** One folder's archive of the backup, as stored. */
  openStream(backup: Backup, folder: BackedUpFolder): Readable {
    return createReadStream(join(this.botDir(backup.bot_id), backup.id, folder.file));
  }

  /** Locks or unlocks the backup. */
  async setLocked(backup: Backup, locked: boolean): Promise<Backup> {
    return this.rewrite({ ...backup, locked });
  }

  /** Keeps the backup's copies to stores. */
  async setCopies(backup: Backup, copies: readonly StoreCopy[]): Promise<Backup> {
    return this.rewrite({ ...backup, copies });
  }

  /**
   * Brings a backup made elsewhere (a store's) into the folder, whole or not at all as `write` does: its archives
   * from `open`, its manifest last. Its checksums are checked where it is restored or verified.
   */
  async adopt(backup: Backup, open: (file: string) => Promise<Readable>): Promise<Backup> {
    const dir = this.botDir(backup.bot_id);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const partial = join(dir, `${PARTIAL}${backup.id}`);
    await rm(partial, { recursive: true, force: true });
    await mkdir(partial, { mode: 0o700 });
    try {
      // Read to at most the size its manifest says: a source cannot make the folder hold more.
      for (const folder of backup.folders) await pipeline(await open(folder.file), atMost(folder.size_bytes, folder.file), createWriteStream(join(partial, folder.file), { flags: 'wx', mode: 0o600, flush: true }));
      const adopted: Backup = { ...backup, locked: false, verification: null };
      await writeDurably(join(partial, MANIFEST), `${JSON.stringify(adopted)}\n`);
      await syncDir(partial);
      await rename(partial, join(dir, backup.id));
      await syncDir(dir);
      return adopted;
    } catch (err) {
      await rm(partial, { recursive: true, force: true });
      throw err;
    }
  }

  /** Keeps the backup's last verification. */
  async setVerification(backup: Backup, verification: Verification): Promise<Backup> {
    return this.rewrite({ ...backup, verification });
  }

  /** The backup's manifest written again whole (a new file renamed over the old). */
  private async rewrite(changed: Backup): Promise<Backup> {
    const dir = join(this.botDir(changed.bot_id), changed.id);
    const next = join(dir, `${MANIFEST}.next`);
    await rm(next, { force: true });
    await writeDurably(next, `${JSON.stringify(changed)}\n`);
    await rename(next, join(dir, MANIFEST));
    await syncDir(dir);
    return changed;
  }

  /** Removes the bot's backups that `policy` does not keep (never a locked one); answers their ids. */
  async prune(botId: string, policy: RetentionPolicy, nowMs = Date.now()): Promise<string[]> {
    const backups = await this.list(botId);
    const kept = retainedIds(backups, policy, nowMs);
    const removed: string[] = [];
    for (const backup of backups) {
      if (kept.has(backup.id) || backup.locked) continue;
      if (await this.remove(botId, backup.id)) removed.push(backup.id);
    }
    return removed;
  }

  /** Removes the backup; false when there was none. */
  async remove(botId: string, id: string): Promise<boolean> {
    if (!(await this.get(botId, id))) return false;
    // Renamed out of the listing first, so that a removal cut short leaves no half backup listed.
    const gone = join(this.botDir(botId), `${PARTIAL}removed-${id}`);
    await rename(join(this.botDir(botId), id), gone);
    await rm(gone, { recursive: true, force: true });
    return true;
  }
}

/** Streams `source` through gzip into `path` (made new), flushed to disk; answers its size and SHA-256. */
async function writeCompressed(source: Readable, path: string): Promise<{ size_bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let size = 0;
  const tap = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      size += chunk.length;
      done(null, chunk);
    },
  });
  await pipeline(source, createGzip(), tap, createWriteStream(path, { flags: 'wx', mode: 0o600, flush: true }));
  return { size_bytes: size, sha256: hash.digest('hex') };
}

/** Passes at most `limit` bytes on, and fails once more come. */
function atMost(limit: number, what: string): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      seen += chunk.length;
      done(seen > limit ? new Error(`${what} is longer than the ${limit} bytes its manifest says`) : null, chunk);
    },
  });
}
