import type { Readable } from 'node:stream';
import type { DataUse } from '../data/data-usage.js';

/**
 * What backups read of a bot's data (docs/api.md §20), from its runtime: which data folders the bot has now, and
 * one of them as a tar stream of the runtime's own archive API, read whether the bot runs or not.
 */
export interface BotDataArchives {
  /** The bot's data folders, by path; NotFound when there is no such bot. */
  folders(botId: string): Promise<readonly string[]>;
  /** The folder as a tar stream (its entries under the folder's own name); nothing of it is held in memory. */
  read(botId: string, path: string, signal: AbortSignal): Promise<Readable>;
  /** Every bot's data folders with the bytes each uses, measured in one go (docs/api.md §19); undefined where the runtime measures none. */
  usage?(): Promise<readonly DataUse[]>;
}
