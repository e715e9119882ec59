import { TooManyRequests } from '../errors.js';

/**
 * The searches of the log history under way at once (docs/api.md §21): each may take its whole time budget of a
 * core, so at most `total` run at once in the agent, and at most one for each bot that asks of itself; past that a
 * search is refused with 429, never queued behind the others.
 */
export class SearchSlots {
  private underWay = 0;
  private readonly botsSearching = new Set<string>();

  constructor(private readonly total: number) {}

  /** Runs `search` in a slot; `botId` is the bot that asks, undefined for the platform. */
  async run<T>(botId: string | undefined, search: () => Promise<T>): Promise<T> {
    if (this.underWay >= this.total) throw new TooManyRequests(`too many log history searches under way (at most ${this.total} at once): try again in a second`, 1);
    if (botId !== undefined && this.botsSearching.has(botId)) throw new TooManyRequests(`bot ${botId} has a log history search under way: one at a time, try again in a second`, 1);
    this.underWay += 1;
    if (botId !== undefined) this.botsSearching.add(botId);
    try {
      return await search();
    } finally {
      this.underWay -= 1;
      if (botId !== undefined) this.botsSearching.delete(botId);
    }
  }
}
