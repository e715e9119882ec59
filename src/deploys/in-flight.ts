import { closeSync, fsyncSync, openSync, readdirSync, readFileSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { privateDir } from '../private-files.js';

/**
 * The deploys this agent has under way, one file each in AGENT_DATA_DIR/deploys (docs/api.md §15), made
 * durable before a deploy touches its bot and removed once it is settled: an agent started again on the same
 * folder (after SIGKILL, a crash, a power cut) knows which deploys were its own, and the revision each was
 * for, and settles them at once; another agent's it leaves to their deadline. Without a folder (':memory:'),
 * held in memory only.
 */
export class InFlightDeploys {
  /** What the folder held when the agent started: its earlier life's deploys, each with its revision (undefined: a rollback's). */
  readonly leftByEarlierLife: ReadonlyMap<string, number | undefined>;

  constructor(private readonly dir: string | undefined) {
    if (dir === undefined) {
      this.leftByEarlierLife = new Map();
      return;
    }
    privateDir(dir);
    // A name beginning with a dot is a mark still being written (never renamed into place): no deploy began.
    this.leftByEarlierLife = new Map(readdirSync(dir).filter((name) => !name.startsWith('.')).map((name) => [name, revisionIn(join(dir, name))]));
  }

  /**
   * Marks the bot's deploy to `revision` (undefined: a rollback, to a revision kept) as under way, durably,
   * before any step of it: written whole under another name, then renamed, so a mark is never torn.
   */
  begin(botId: string, revision?: number): void {
    if (this.dir === undefined) return;
    const writing = join(this.dir, `.${botId}`);
    const file = openSync(writing, 'w', 0o600);
    try {
      writeSync(file, `${Date.now()} ${revision ?? '-'}\n`);
      fsyncSync(file);
    } finally {
      closeSync(file);
    }
    renameSync(writing, join(this.dir, botId));
    syncDir(this.dir);
  }

  /** The bot's deploy is settled: its mark goes. */
  end(botId: string): void {
    if (this.dir === undefined) return;
    try {
      unlinkSync(join(this.dir, botId));
      syncDir(this.dir);
    } catch {
      // Gone already: settled twice, by this life and the check of an earlier one.
    }
  }
}

/** The revision a mark names; undefined for a rollback's, and for a mark of an older agent (its time alone). */
function revisionIn(path: string): number | undefined {
  const revision = Number(/^\d+ (\d+)\n$/.exec(readFileSync(path, 'utf8'))?.[1]);
  return Number.isSafeInteger(revision) && revision > 0 ? revision : undefined;
}

/** The folder's entries made durable: a file made or removed survives a power cut. */
function syncDir(dir: string): void {
  const handle = openSync(dir, 'r');
  try {
    fsyncSync(handle);
  } finally {
    closeSync(handle);
  }
}
