import type { Readable } from 'node:stream';

/** One data folder's archive, as a restore writes it: a gzip-compressed tar, its entries under the folder's last name. */
export interface FolderArchive {
  readonly path: string;
  open(): Readable;
}

/** A backup's folders unpacked by the runtime into scratch folders of their own, beside the bot's data, not yet in it. */
export interface ScratchRestore {
  /** One folder as unpacked, read back through the runtime's archive API (a plain tar). */
  read(path: string, signal: AbortSignal): Promise<Readable>;
  /** Replaces the bot's data folders with the scratch ones, all in one step the runtime carries to its end even if the agent dies. */
  swap(signal: AbortSignal): Promise<void>;
  /** Removes the scratch folders and what held them; safe to call more than once. */
  discard(): Promise<void>;
}

/** A restore the runtime holds something of (its scratch folders, its helpers), as `leftovers` finds it. */
export interface LeftRestore {
  readonly botId: string;
  readonly tag: string;
  /** When it began; undefined where its runtime objects do not say. */
  readonly begunAt: Date | undefined;
  /** Whether its bot ran before it, and is to be started again once it is settled. */
  readonly startAfter: boolean;
}

/**
 * What restores ask of the runtime (docs/api.md §20). A restore is first unpacked into scratch folders (made before
 * the bot is touched, marked with its tag, when it began and whether the bot ran), then swapped in; one an agent was
 * killed in is found again by `leftovers` and `settle`d: carried to its end where its swap had begun, else undone,
 * the bot's data never a mix. Which leftovers are an agent's to settle is the caller's to say.
 */
export interface BotDataRestores {
  /** The size each of the bot's data folders may hold (`size_mb`), by path; undefined where none was asked. */
  sizes(botId: string): Promise<ReadonlyMap<string, number | undefined>>;
  scratch(botId: string, archives: readonly FolderArchive[], options: { tag: string; startAfter: boolean; signal: AbortSignal }): Promise<ScratchRestore>;
  /** Every restore the runtime holds something of, under way or left. */
  leftovers(): Promise<LeftRestore[]>;
  /** Carries a left restore's swap to its end where it had begun, then removes what the runtime holds of it. */
  settle(left: LeftRestore): Promise<void>;
}
