import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { AgentError, AlreadyExists, NotFound, NotImplemented, RuntimeUnavailable, StorageFull, StoreFailed, Unprocessable } from '../errors.js';
import { ArchiveRefused, readArchive } from './archive-check.js';
import type { ArchiveReading } from './archive-check.js';
import { PRE_OUTPUT_BYTES } from './backup-folder.js';
import type { Backup, BackupMode, PreCommandRun, StoreCopy, Verification } from './backup-folder.js';
import type { BackupStores } from './backup-stores.js';
import type { BackupFolder } from './backup-folder.js';
import type { BotDataArchives } from './data-archives.js';
import type { BotDataRestores, FolderArchive, LeftRestore, ScratchRestore } from './data-restores.js';
import { retainedIds } from './retention.js';
import { whileStreaming } from '../streaming-gc.js';
import type { RetentionPolicy } from './retention.js';

/** How long one folder's archive may take to read, at most; and a whole restore or verification. */
const READ_DEADLINE_MS = 30 * 60_000;
const RESTORE_DEADLINE_MS = 60 * 60_000;
/**
 * How long a restore the runtime holds that no mark in this agent's folder names (another agent's, under way or
 * left) is left alone: longer than any restore takes (its hour, the swap's hour, the copy of the data before it).
 */
const FOREIGN_RESTORE_MS = 6 * 60 * 60_000;
const MIB = 1024 * 1024;
/** What a folder without a size_mb may unpack to at most: 100 times its archive, and never less than 1 GiB (docs/api.md §20). */
const UNSIZED_RATIO = 100;
const UNSIZED_FLOOR_BYTES = 1024 * MIB;

/** What a backup in `stop` mode stops and starts the bot through: the agent's own lifecycle, in turn with every other operation. */
export interface BackupPower {
  running(botId: string): Promise<boolean>;
  stop(botId: string): Promise<unknown>;
  start(botId: string): Promise<unknown>;
  /** A restored bot's run judged as a deploy's is (docs/api.md §15); undefined where the runtime cannot say. */
  judge?(botId: string, ask: RunAsk): Promise<RunVerdict>;
  /** A command run in the bot (a backup's `pre`), as the runtime's exec runs it; undefined where the runtime runs none. */
  command?(botId: string, argv: readonly string[], bounds: { timeoutMs: number; maxBytes: number }): Promise<PreCommandEnd>;
}

/** How a pre command ended, as the runtime tells it (its output bounded as asked, measured as answered in JSON). */
export interface PreCommandEnd {
  readonly exitCode: number | null;
  readonly output: string;
  readonly truncated: boolean;
  readonly timedOut: boolean;
}

/** How a backup is made consistent (docs/api.md §20): `pre` runs its command in the bot first, then copies it live. */
export interface BackupHow {
  readonly mode: BackupMode;
  readonly pre?: { readonly command: readonly string[]; readonly timeoutS: number };
}

/** The longest a backup's pre command may take, and its default (docs/api.md §20). */
export const PRE_TIMEOUT_MAX_S = 600;
export const PRE_TIMEOUT_DEFAULT_S = 60;

/** How a backup is made, as a body or a schedule's action says it: `stop` unless told. */
export function backupHow(mode: BackupMode | undefined, pre?: readonly string[], preTimeoutS?: number): BackupHow {
  return mode === 'pre' ? { mode, pre: { command: pre ?? [], timeoutS: preTimeoutS ?? PRE_TIMEOUT_DEFAULT_S } } : { mode: mode ?? 'stop' };
}

/** How long a restored bot must be up (healthy, where it has a check), and how long it may take (docs/api.md §20). */
export interface RunAsk {
  readonly minReadyS: number;
  readonly deadlineS: number;
}
/** Whether the run stayed up as asked, and why not (as src/deploys/run-verdict.ts judges it). */
export type RunVerdict = { readonly ok: true } | { readonly ok: false; readonly reason: string };

/**
 * Backups of bots' data to the agent's backup folder (docs/api.md §20): one at a time per bot, each made
 * consistent as asked (`stop`: the bot stopped while it is copied and started again, the downtime measured;
 * `live`: copied as it runs).
 */
export class Backups {
  private readonly underWay = new Set<string>();
  /** The tags of the restores and verifications this agent has under way. */
  private readonly restoring = new Set<string>();

  constructor(
    private readonly archives: BotDataArchives,
    readonly folder: BackupFolder,
    private readonly power: BackupPower,
    /** Where the runtime restores; undefined: restores and verifications answer 501. */
    private readonly restores?: BotDataRestores,
    /** Tells of a restore or a verification as the bot's event (docs/api.md §9). */
    private readonly note: (botId: string, type: string, fields: Record<string, unknown>) => Promise<void> = async () => undefined,
    /** The S3-compatible stores backups may be copied to (AGENT_BACKUP_STORES). */
    private readonly stores?: BackupStores,
  ) {}

  /**
   * A backup of the bot now, copied to each of `stores` once made; with `keep`, the bot's backups that policy does
   * not keep are removed from the folder. A copy that fails is kept in the backup's `copies` and is StoreFailed.
   */
  async take(botId: string, how: BackupHow, keep?: RetentionPolicy, stores: readonly string[] = []): Promise<{ backup: Backup; removed: string[] }> {
    return whileStreaming(async () => {
      for (const name of stores) this.storeNamed(name);
      let backup = await this.make(botId, how);
      const copies: StoreCopy[] = [];
      for (const name of stores) {
        try {
          await this.stores!.put(name, backup, (file) => this.folder.openStream(backup, backup.folders.find((folder) => folder.file === file)!));
          copies.push({ store: name, at: new Date().toISOString(), ok: true });
        } catch (err) {
          copies.push({ store: name, at: new Date().toISOString(), ok: false, message: storeFailure(err) });
        }
      }
      if (copies.length > 0) backup = await this.folder.setCopies(backup, copies);
      const removed = new Set(keep ? await this.folder.prune(botId, keep) : []);
      // Each store the copy reached is kept by the same policy; one that failed now is left as it was.
      for (const copy of keep ? copies.filter((made) => made.ok) : []) {
        for (const id of await this.pruneStore(copy.store, botId, keep!)) removed.add(id);
      }
      const failed = copies.filter((copy) => !copy.ok);
      if (failed.length > 0) {
        throw new StoreFailed(`backup ${backup.id} of bot ${botId} was kept in the agent's folder, but its copy to ${failed.map((copy) => `store ${copy.store} failed: ${copy.message}`).join('; ')}`);
      }
      return { backup, removed: [...removed] };
    });
  }

  /** Removes the store's backups of the bot the policy does not keep, never a locked one (there, or in the agent's folder); answers their ids. */
  private async pruneStore(store: string, botId: string, keep: RetentionPolicy, nowMs = Date.now()): Promise<string[]> {
    return this.fromStore(store, async () => {
      // Locked where the agent's folder holds the same backup locked (a lock made after the copy): retention keeps those.
      const listed = await this.withFolderLocks(await this.stores!.list(store, botId));
      const kept = retainedIds(listed, keep, nowMs);
      const removed: string[] = [];
      for (const backup of listed) {
        if (kept.has(backup.id)) continue;
        await this.stores!.remove(store, backup);
        removed.push(backup.id);
      }
      return removed;
    });
  }

  private async withFolderLocks(listed: readonly Backup[]): Promise<Backup[]> {
    return Promise.all(listed.map(async (backup) => ((await this.lockedAnywhere(backup)) ? { ...backup, locked: true } : backup)));
  }

  private async lockedAnywhere(backup: Backup): Promise<boolean> {
    return backup.locked === true || (await this.folder.get(backup.bot_id, backup.id))?.locked === true;
  }

  /**
   * Removes the backup from the agent's folder, or from the store named (docs/api.md §20). AlreadyExists (409) for a
   * locked one (in the store, a copy locked in either place), NotFound for none.
   */
  async remove(botId: string, backupId: string, store?: string): Promise<void> {
    const backup = await this.one(botId, backupId, store);
    if (await this.lockedAnywhere(backup)) throw new AlreadyExists(`backup ${backup.id} of bot ${botId} is locked: unlock it first (POST .../backups/${backup.id}/unlock)`);
    if (store !== undefined) return this.fromStore(store, () => this.stores!.remove(store, backup));
    if (!(await this.folder.remove(botId, backup.id))) throw new NotFound(`no backup ${backup.id} of bot ${botId}`);
  }

  /** The bot's backups in the agent's folder, or in the store named. */
  async list(botId: string, store?: string): Promise<Backup[]> {
    if (store === undefined) return this.folder.list(botId);
    return this.fromStore(store, () => this.storeNamed(store).list(store, botId));
  }

  /** One backup, from the agent's folder or the store named; NotFound when it holds none of that id. */
  async one(botId: string, backupId: string, store?: string): Promise<Backup> {
    const backup = store === undefined ? await this.folder.get(botId, backupId) : await this.fromStore(store, () => this.storeNamed(store).manifest(store, botId, backupId));
    if (!backup) throw new NotFound(`no backup ${JSON.stringify(backupId.slice(0, 64))} of bot ${botId}${store === undefined ? '' : ` in store ${store}`}`);
    return backup;
  }

  /** A backup of a store brought into the agent's folder (where it is not already), for a restore or a verification. */
  private async local(botId: string, backupId: string, store: string | undefined): Promise<Backup> {
    const here = await this.folder.get(botId, backupId);
    if (here || store === undefined) return this.one(botId, backupId);
    const there = await this.one(botId, backupId, store);
    const stores = this.storeNamed(store);
    return this.fromStore(store, () => this.folder.adopt(there, (file) => stores.open(store, there, file)));
  }

  private storeNamed(name: string): BackupStores {
    if (!this.stores?.has(name)) {
      throw new Unprocessable(`no backup store ${JSON.stringify(name.slice(0, 64))}: ${this.stores && this.stores.names().length > 0 ? `the stores are ${this.stores.names().join(', ')}` : 'none is configured'} (AGENT_BACKUP_STORES, docs/api.md §20)`);
    }
    return this.stores;
  }

  /** A store's read, its failure said as the store's (502), never with its keys. */
  private async fromStore<T>(store: string, read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } catch (err) {
      if (err instanceof AgentError) throw err;
      throw new StoreFailed(`backup store ${store} failed: ${storeFailure(err)}`, { cause: err });
    }
  }

  private async make(botId: string, how: BackupHow): Promise<Backup> {
    const folders = await this.archives.folders(botId);
    if (folders.length === 0) throw new Unprocessable(`bot ${botId} has no data folders to back up: a bot's data folders are named on its create (docs/api.md §19)`);
    return this.alone(botId, async () => {
      const pre = how.mode === 'pre' ? await this.runPre(botId, how.pre!) : undefined;
      return this.copy(botId, folders, how.mode, pre);
    });
  }

  /** Runs a backup's pre command in the bot (docs/api.md §20); a command that fails or outlasts its time-out makes no backup (422). */
  private async runPre(botId: string, pre: NonNullable<BackupHow['pre']>): Promise<PreCommandRun> {
    if (!this.power.command) throw new NotImplemented('a backup\'s pre command is not available on this runtime: make it in mode stop or live');
    if (!(await this.power.running(botId))) throw new Unprocessable(`bot ${botId} is not running: a backup's pre command runs in the bot; start it first, or make the backup in mode stop or live`);
    const result = await this.power.command(botId, pre.command, { timeoutMs: pre.timeoutS * 1000, maxBytes: PRE_OUTPUT_BYTES });
    const said = result.output.trim().slice(-500);
    if (result.timedOut) throw new Unprocessable(`the pre command of bot ${botId}'s backup did not end within ${pre.timeoutS} s and was killed; no backup was made${said ? `: ${said}` : ''}`);
    if (result.exitCode !== 0) {
      throw new Unprocessable(`the pre command of bot ${botId}'s backup ${result.exitCode === null ? 'ended with no exit code' : `exited with code ${result.exitCode}`}; no backup was made${said ? `: ${said}` : ''}`);
    }
    return { command: pre.command, exit_code: result.exitCode, output: result.output, output_truncated: result.truncated };
  }

  /** `work` on the bot, no other backup, restore or verification of it under way meanwhile (409). */
  private async alone<T>(botId: string, work: () => Promise<T>): Promise<T> {
    if (this.underWay.has(botId)) throw new AlreadyExists(`a backup, restore or verification of bot ${botId} is under way: wait for it to end`);
    this.underWay.add(botId);
    try {
      return await work();
    } finally {
      this.underWay.delete(botId);
    }
  }

  private async copy(botId: string, folders: readonly string[], mode: BackupMode, pre?: PreCommandRun): Promise<Backup> {
    const stopped = mode === 'stop' && (await this.power.running(botId));
    let stoppedAt: number | undefined;
    let downtimeMs: number | null = null;
    const startAgain = async () => {
      if (stoppedAt === undefined || downtimeMs !== null) return;
      try {
        await this.power.start(botId);
        await this.folder.unmarkStopped(botId);
      } finally {
        downtimeMs = Date.now() - stoppedAt;
      }
    };
    try {
      if (stopped) {
        await this.folder.markStopped(botId);
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
          return { mode, downtime_ms: mode === 'stop' ? (downtimeMs ?? 0) : null, ...(pre ? { pre } : {}) };
        },
      );
    } catch (err) {
      throw diskFull(err, `the backup of bot ${botId} failed`);
    } finally {
      // A copy (or a stop) that failed: the bot runs again all the same.
      await startAgain();
    }
  }

  /**
   * Marks the bot, on disk, as stopped by this agent for a step it will start it again after (a move, docs/api.md
   * §17): an agent killed before it did finds the mark when it starts next (`startStopped`).
   */
  async markStopped(botId: string): Promise<void> {
    await this.folder.markStopped(botId);
  }

  /** The bot runs again, or is not this node's to run: its mark goes. */
  async unmarkStopped(botId: string): Promise<void> {
    await this.folder.unmarkStopped(botId);
  }

  /**
   * Starts the bots of `inCare` a backup or a move stopped and an agent killed mid-way left stopped (docs/api.md §20),
   * those `mayStart` allows (a move's bot the fleet now places on another node is not started; its mark goes). A
   * `mayStart` that throws (the fleet's placements unread) leaves the bot stopped and its mark for the next start.
   */
  async startStopped(inCare: (botId: string) => boolean, mayStart: (botId: string) => Promise<boolean> = async () => true): Promise<{ started: string[]; failures: string[] }> {
    const started: string[] = [];
    const failures: string[] = [];
    for (const botId of (await this.folder.stoppedForBackups()).filter(inCare)) {
      try {
        if (await mayStart(botId)) {
          await this.power.start(botId);
          started.push(botId);
        }
      } catch (err) {
        // A bot removed since has nothing to start.
        if (!(err instanceof NotFound)) {
          failures.push(`bot ${botId}: ${(err as Error).message}`);
          continue;
        }
      }
      await this.folder.unmarkStopped(botId);
    }
    return { started, failures };
  }

  /**
   * Restores the backup into its bot (docs/api.md §20): every archive checked and unpacked into scratch folders and
   * read back the same before the bot is touched; then the bot stopped, its data as it was kept as a backup of its
   * own, the scratch folders swapped in, and the bot started again if it ran; with `judged`, its run then judged as
   * a deploy's is, and a run that fails it has the restore undone (Unprocessable).
   */
  async restore(from: string, backupId: string, store?: string, botId = from, judged?: RunAsk): Promise<{ backup: Backup; before: Backup }> {
    return whileStreaming(async () => {
      const { backup, before } = await this.alone(botId, async () => {
        const done = await this.swappedIn(botId, await this.local(from, backupId, store), true);
        const verdict = done.started && judged !== undefined ? await this.judgedRun(botId, judged) : { ok: true as const };
        if (!verdict.ok) await this.undone(botId, done.backup, done.before!, verdict.reason);
        return done;
      });
      await this.note(botId, 'restored', { backup_id: backup.id, before_backup_id: before!.id, ...(from === botId ? {} : { from_bot_id: from }) });
      return { backup, before: before! };
    });
  }

  /**
   * A bot moved here from another node (docs/api.md §17): its backup there, fetched whole into this agent's folder
   * (`open` reads each archive from that node) and restored into the bot made here, stopped, as any restore is
   * (checked, unpacked, read back, swapped). Its folders were made empty here: nothing is kept of them first.
   */
  async takeIn(backup: Backup, open: (file: string) => Promise<Readable>): Promise<Backup> {
    return whileStreaming(async () => {
      const here: Backup = (await this.folder.get(backup.bot_id, backup.id)) ?? (await this.folder.adopt(backup, open).catch((err: unknown) => Promise.reject(diskFull(err, `the data of bot ${backup.bot_id} was not taken in`))));
      return (await this.alone(backup.bot_id, () => this.swappedIn(backup.bot_id, here, false))).backup;
    });
  }

  /** The restored bot's run, judged as a deploy's is (docs/api.md §20); where the runtime cannot say, it passes. */
  private async judgedRun(botId: string, ask: RunAsk): Promise<RunVerdict> {
    if (!this.power.judge) return { ok: true };
    return this.power.judge(botId, ask).catch((err: unknown) => ({ ok: false as const, reason: `its run could not be read: ${(err as Error).message}` }));
  }

  /** A restore whose run failed: the data as it was before swapped back in as any restore is, the bot started again; told, and Unprocessable. */
  private async undone(botId: string, backup: Backup, before: Backup, reason: string): Promise<never> {
    let back = `its data as it was (backup ${before.id}) is back`;
    try {
      // Found stopped where its failed run ended: started again all the same, as it ran before the restore.
      if (!(await this.swappedIn(botId, before, false)).started) await this.power.start(botId);
    } catch (err) {
      back = `and its data as it was (backup ${before.id}) could not be put back: ${(err as Error).message}`;
    }
    await this.note(botId, 'restore-failed', { backup_id: backup.id, before_backup_id: before.id, reason });
    throw new Unprocessable(`the restore of backup ${backup.id} into bot ${botId} was undone: ${reason}; ${back}`);
  }

  /**
   * Puts the backup's data into the bot (docs/api.md §20): checked, unpacked beside it and read back before it is
   * touched, then the bot stopped, its data as it is kept as a backup first where `keepBefore`, the scratch
   * folders swapped in, and the bot started again if it ran (`started`). The caller holds the bot alone.
   */
  private async swappedIn(botId: string, backup: Backup, keepBefore: boolean): Promise<{ backup: Backup; before: Backup | undefined; started: boolean }> {
    const restores = this.restoresHere();
    const signal = AbortSignal.timeout(RESTORE_DEADLINE_MS);
    const readings = await this.checked(backup, restores, botId);
    const wasRunning = await this.power.running(botId);
    return this.marked(botId, async (tag) => {
      // Made before the bot is stopped, and marked with whether it ran: an agent killed from here on leaves a restore the next one settles.
      const scratch = await restores.scratch(botId, this.archivesOf(backup), { tag, startAfter: wasRunning, signal });
      try {
        await this.proven(backup, scratch, readings, signal);
        // Stopped whatever it was found as (a stop of a stopped bot changes nothing): the swap never runs under a
        // running bot, and the copy before it never starts the bot.
        await this.power.stop(botId);
        const before = keepBefore
          ? await this.folder
              .write(botId, await this.archives.folders(botId), (path) => this.archives.read(botId, path, AbortSignal.timeout(READ_DEADLINE_MS)), async () => ({ mode: 'stop', downtime_ms: 0 }))
              .catch((err: unknown) => Promise.reject(diskFull(err, `the restore of backup ${backup.id} into bot ${botId} was not begun: its data as it is could not be kept first`)))
          : undefined;
        await scratch.swap(signal).catch((err: unknown) => {
          if (err instanceof AgentError) throw err;
          const kept = before ? `; its data as it was before is backup ${before.id}: restore that` : '';
          throw new RuntimeUnavailable(`the restore of backup ${backup.id} into bot ${botId} failed as its data was swapped (${(err as Error).message})${kept}`, { cause: err });
        });
        return { backup, before, started: wasRunning };
      } finally {
        await this.discarded(scratch, tag);
        if (wasRunning) await this.power.start(botId);
      }
    });
  }

  /** Verifies the backup (docs/api.md §20): unpacked into scratch folders and read back, the trees compared; the outcome kept with it and told. */
  async verify(botId: string, backupId: string, store?: string): Promise<Backup> {
    return whileStreaming(async () => {
      const restores = this.restoresHere();
      return this.alone(botId, async () => {
        const backup = await this.local(botId, backupId, store);
        const signal = AbortSignal.timeout(RESTORE_DEADLINE_MS);
        let failure: string | undefined;
        try {
          const readings = await this.checked(backup, restores);
          await this.marked(botId, async (tag) => {
            const scratch = await restores.scratch(botId, this.archivesOf(backup), { tag, startAfter: false, signal });
            try {
              await this.proven(backup, scratch, readings, signal);
            } finally {
              await this.discarded(scratch, tag);
            }
          });
        } catch (err) {
          if (!(err instanceof Unprocessable)) throw err;
          failure = err.message;
        }
        const verification: Verification = { at: new Date().toISOString(), ok: failure === undefined, ...(failure === undefined ? {} : { message: failure }) };
        const verified = await this.folder.setVerification(backup, verification);
        await this.note(botId, failure === undefined ? 'backup-verified' : 'backup-verify-failed', { backup_id: backup.id, ...(failure === undefined ? {} : { reason: failure }) });
        return verified;
      });
    });
  }

  /**
   * Settles the restores and verifications an agent stopped or killed mid-way left on the runtime, of the bots
   * `inCare` says (docs/api.md §20): those this agent's folder marks at once, any other only once it is older than
   * any restore runs (another agent's may be under way). Each bot that ran before its restore is started again.
   */
  async settleRestores(inCare: (botId: string) => boolean): Promise<{ started: string[]; failures: string[] }> {
    const started: string[] = [];
    const failures: string[] = [];
    if (!this.restores) return { started, failures };
    const marks = await this.folder.restoresMarked();
    const left = await this.restores.leftovers();
    for (const restore of left) {
      if (this.restoring.has(restore.tag) || !inCare(restore.botId) || !(marks.has(restore.tag) || foreignLongEnough(restore))) continue;
      try {
        await this.alone(restore.botId, () => this.restores!.settle(restore));
        await this.folder.unmarkRestore(restore.tag);
        if (restore.startAfter) {
          await this.power.start(restore.botId);
          started.push(restore.botId);
        }
      } catch (err) {
        // A bot removed since has nothing to start; one with an operation under way is settled by the next agent.
        if (err instanceof NotFound || err instanceof AlreadyExists) continue;
        // Its scratch copies stay, and the bot stopped: its data may be half swapped.
        failures.push(`bot ${restore.botId}: ${(err as Error).message}`);
      }
    }
    // Marks of restores the runtime holds nothing of: killed before it made anything, or after it removed all.
    const held = new Set(left.map((restore) => restore.tag));
    for (const [tag, botId] of marks) if (!held.has(tag) && !this.restoring.has(tag) && (botId === '' || inCare(botId))) await this.folder.unmarkRestore(tag);
    return { started, failures };
  }

  /** `work` under a new restore tag, marked in the folder before the runtime holds anything of it. */
  private async marked<T>(botId: string, work: (tag: string) => Promise<T>): Promise<T> {
    const tag = randomBytes(4).toString('hex');
    this.restoring.add(tag);
    try {
      await this.folder.markRestore(tag, botId);
      return await work(tag);
    } finally {
      this.restoring.delete(tag);
    }
  }

  /** The scratch folders removed; the mark too, once the runtime holds nothing of the restore (else the next agent settles it). */
  private async discarded(scratch: ScratchRestore, tag: string): Promise<void> {
    const removed = await scratch.discard().then(
      () => true,
      () => false,
    );
    if (removed) await this.folder.unmarkRestore(tag).catch(() => undefined);
  }

  private restoresHere(): BotDataRestores {
    if (!this.restores) throw new NotImplemented('restores are not available here: the runtime restores no bots\' data yet (docs/api.md §20)');
    return this.restores;
  }

  private archivesOf(backup: Backup): FolderArchive[] {
    return backup.folders.map((kept) => ({ path: kept.path, open: () => this.folder.openStream(backup, kept) }));
  }

  /**
   * Each archive of the backup read through: its SHA-256 the one kept, nothing in it that climbs out, links out, is a
   * device, or unpacks past the folder's size. Where restored `into` a bot, each folder must be one it has now.
   */
  private async checked(backup: Backup, restores: BotDataRestores, into?: string): Promise<ArchiveReading[]> {
    const sizes = await restores.sizes(into ?? backup.bot_id);
    const readings: ArchiveReading[] = [];
    for (const kept of backup.folders) {
      if (into !== undefined && !sizes.has(kept.path)) {
        throw new Unprocessable(`bot ${into} has no data folder ${kept.path} now: a restore writes only into the folders the bot has (${[...sizes.keys()].join(', ') || 'none'})`);
      }
      const sizeMb = sizes.get(kept.path);
      const limitBytes = sizeMb === undefined ? Math.max(UNSIZED_FLOOR_BYTES, UNSIZED_RATIO * kept.size_bytes) : sizeMb * MIB;
      let reading: ArchiveReading;
      try {
        reading = await readArchive(this.folder.openStream(backup, kept), kept.path, { gzipped: true, limitBytes });
      } catch (err) {
        if (err instanceof ArchiveRefused) throw new Unprocessable(`backup ${backup.id}'s archive of ${kept.path} is refused: ${err.message}; nothing was written`, { cause: err });
        throw err;
      }
      if (reading.sha256 !== kept.sha256) throw new Unprocessable(`backup ${backup.id}'s archive of ${kept.path} is refused: its SHA-256 is not the one kept when it was made (it was changed since); nothing was written`);
      readings.push(reading);
    }
    return readings;
  }

  /** Each scratch folder read back through the runtime gives the tree its archive holds. */
  private async proven(backup: Backup, scratch: ScratchRestore, readings: readonly ArchiveReading[], signal: AbortSignal): Promise<void> {
    for (const [index, kept] of backup.folders.entries()) {
      const back = await readArchive(await scratch.read(kept.path, signal), kept.path, { gzipped: false, limitBytes: Number.MAX_SAFE_INTEGER }).catch((err: unknown) => {
        throw err instanceof ArchiveRefused ? new Unprocessable(`backup ${backup.id}'s folder ${kept.path}, unpacked, could not be read back: ${err.message}`) : err;
      });
      if (back.treeDigest !== readings[index]?.treeDigest) {
        throw new Unprocessable(`backup ${backup.id}'s folder ${kept.path}, unpacked, does not read back as its archive holds it (${back.entries} entries read back, ${readings[index]?.entries ?? 0} in the archive)`);
      }
    }
  }
}

function foreignLongEnough(restore: LeftRestore): boolean {
  return restore.begunAt === undefined || Date.now() - restore.begunAt.getTime() > FOREIGN_RESTORE_MS;
}

/** What a backup's answer (and a scheduled backup's run) says of it. */
export function backupMade(backup: Backup, removed: readonly string[]): string {
  const downtime = backup.downtime_ms === null ? '' : `, the bot stopped ${backup.downtime_ms} ms for it`;
  const pruned = removed.length === 0 ? '' : `; retention removed ${removed.length} older backup(s)`;
  return `backup ${backup.id} of bot ${backup.bot_id} made: ${backup.folders.length} folder(s), ${backup.size_bytes} bytes${downtime}${pruned}`;
}

/** A store's failure as an answer may say it: the SDK's error name and message, at most 300 characters. */
function storeFailure(err: unknown): string {
  const { name, message, $metadata } = err as { name?: string; message?: string; $metadata?: { httpStatusCode?: number } };
  const status = $metadata?.httpStatusCode === undefined ? '' : ` (HTTP ${$metadata.httpStatusCode})`;
  return `${name ?? 'Error'}${status}: ${message ?? String(err)}`.slice(0, 300);
}

/** A full disk of the backup folder said as StorageFull (507), after `what`; any other failure as it is. */
function diskFull(err: unknown, what: string): unknown {
  return (err as NodeJS.ErrnoException).code === 'ENOSPC' ? new StorageFull(`${what}: the disk of the agent's backup folder is full; nothing of it was kept`, { cause: err }) : err;
}
