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

/**
 * What restores ask of the runtime (docs/api.md §20). A restore is first unpacked into scratch folders (made before
 * the bot is touched, and marked with whether it ran), then swapped in; one an agent was killed in is found again
 * by `leftovers`: carried to its end where its swap had begun, else undone, the bot's data never a mix.
 */
export interface BotDataRestores {
  /** The size each of the bot's data folders may hold (`size_mb`), by path; undefined where none was asked. */
  sizes(botId: string): Promise<ReadonlyMap<string, number | undefined>>;
  scratch(botId: string, archives: readonly FolderArchive[], options: { startAfter: boolean; signal: AbortSignal }): Promise<ScratchRestore>;
  /**
   * Settles the restores left by an agent stopped or killed mid-way, of the bots `inCare` says: answers the bots to
   * start again, and what could not be settled (its bot left stopped, its scratch copies kept).
   */
  leftovers(inCare: (botId: string) => boolean): Promise<{ toStart: string[]; failures: string[] }>;
}
