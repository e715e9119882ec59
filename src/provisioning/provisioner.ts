import type { BotSpec, BotSummary } from './bot-spec.js';

/**
 * Creates, lists and removes bots in a runtime. Throws the errors of
 * `src/errors.ts`: AlreadyExists for a bot id in use, BadRequest for an image
 * the runtime does not have, NotFound, RuntimeUnavailable.
 */
export interface Provisioner {
  /** Creates the bot with its labels, limits and full environment, and starts it. */
  create(spec: BotSpec): Promise<void>;
  /** Every bot, or those of one owner. */
  list(ownerId: string | undefined): Promise<BotSummary[]>;
  /** Removes the bot (and what was made for it, such as its token's Secret). */
  remove(botId: string): Promise<void>;
}
