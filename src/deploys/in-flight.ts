import { closeSync, fsyncSync, openSync, readdirSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { privateDir } from '../private-files.js';

/**
 * The deploys this agent has under way, one file each in AGENT_DATA_DIR/deploys (docs/api.md §15), made
 * durable before a deploy touches its bot and removed once it is settled: an agent started again on the same
 * folder (after SIGKILL, a crash, a power cut) knows which deploys were its own, and settles them at once;
 * another agent's it leaves to their deadline. Without a folder (':memory:'), held in memory only.
 */
export class InFlightDeploys {
  /** What the folder held when the agent started: its earlier life's deploys. */
  readonly leftByEarlierLife: ReadonlySet<string>;

  constructor(private readonly dir: string | undefined) {
    if (dir === undefined) {
      this.leftByEarlierLife = new Set();
      return;
    }
    privateDir(dir);
    this.leftByEarlierLife = new Set(readdirSync(dir).filter((name) => !name.startsWith('.')));
  }

  /** Marks the bot's deploy as under way, durably, before any step of it. */
  begin(botId: string): void {
    if (this.dir === undefined) return;
    const file = openSync(join(this.dir, botId), 'w', 0o600);
    try {
      writeSync(file, `${Date.now()}\n`);
      fsyncSync(file);
    } finally {
      closeSync(file);
    }
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

/** The folder's entries made durable: a file made or removed survives a power cut. */
function syncDir(dir: string): void {
  const handle = openSync(dir, 'r');
  try {
    fsyncSync(handle);
  } finally {
    closeSync(handle);
  }
}
