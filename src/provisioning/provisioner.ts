import type { BotDataArchives } from '../backups/data-archives.js';
import type { BotDataRestores } from '../backups/data-restores.js';
import type { BotSpec, BotSummary } from './bot-spec.js';
import type { RevisionRuntime } from './revisions.js';

/** How far a pull has come: the bytes of its layers downloaded, of those the registry has announced. */
export interface PullProgress {
  readonly bytes: number;
  readonly totalBytes: number;
}

/** What a create reports while it pulls its image (docs/api.md §14): its start, its progress, its end. */
export interface PullReport {
  started(image: string): void;
  progress(image: string, progress: PullProgress): void;
  ended(image: string, outcome: { readonly bytes: number; readonly durationMs: number } | { readonly error: Error }): void;
}

/**
 * Creates, lists and removes bots in a runtime. Throws the errors of
 * `src/errors.ts`: AlreadyExists for a bot id in use, the pull errors of docs/api.md §14 for an image
 * the runtime does not have and cannot pull, Unprocessable, NotFound, RuntimeUnavailable.
 */
export interface Provisioner {
  /** Creates the bot with its labels, limits and full environment (its image pulled first where missing), and starts it. */
  create(spec: BotSpec, pulls?: PullReport): Promise<void>;
  /** Every bot, or those of one owner. */
  list(ownerId: string | undefined): Promise<BotSummary[]>;
  /**
   * Removes the bot (and what was made for it, such as its token's Secret), and its data unless `keepData`
   * (docs/api.md §19); answers the folders its data held.
   */
  remove(botId: string, options?: RemoveOptions): Promise<RemovedBot>;
  /** Its bots' revisions, where the runtime deploys (docs/api.md §15). */
  readonly revisions?: RevisionRuntime;
  /** Its bots' data folders, read for backups (docs/api.md §20), where the runtime keeps bots' data. */
  readonly dataArchives?: BotDataArchives;
  /** Restores into its bots' data folders (docs/api.md §20), where the runtime keeps bots' data. */
  readonly dataRestores?: BotDataRestores;
  /**
   * What another node needs to make the bot again as it is (docs/api.md §17), where the runtime moves bots
   * between nodes. Throws NotFound, Unprocessable (a bot no agent made), RuntimeUnavailable.
   */
  exportBot?(botId: string): Promise<MovableBot>;
  /**
   * Creates the bot as `create` does but leaves it stopped (a move's copy, started once the fleet places it on
   * this node: docs/fleet.md); with `imageId`, Unprocessable unless its image is that very one.
   */
  createStopped?(spec: BotSpec, imageId: string | undefined): Promise<void>;
}

/**
 * A bot as another node makes it again: its spec (the image's own settings left to the image; its image named by
 * digest where the engine knows one), its revision, whether it ran, and the id of the image it runs.
 */
export interface MovableBot {
  readonly spec: BotSpec & { readonly revision: number };
  readonly running: boolean;
  readonly imageId: string | undefined;
}

export interface RemoveOptions {
  /** Its data stays on the runtime, for a create of the bot with the same folders to take up again. */
  readonly keepData?: boolean | undefined;
}

/** What a removal did with the bot's data. */
export interface RemovedBot {
  /** The folders its data held: removed with it, or kept as asked. */
  readonly dataFolders: readonly string[];
}
