/** The first wait between two of the watchdog's restarts of one bot, the most it grows to, and when it is forgotten. */
export const BACKOFF_FIRST_MS = 10_000;
export const BACKOFF_MAX_MS = 300_000;
export const BACKOFF_RESET_MS = 600_000;

/**
 * How long the watchdog waits before it restarts a bot again, as the kubelet does for a crashing container
 * (docs/api.md §13): nothing before the first restart, then 10 s, doubling each time, at most 5 minutes;
 * a bot not restarted for 10 minutes starts again from nothing. However short its check's grace (an image's
 * own labels included), a bot is restarted at most 5 times in 5 minutes, then once every 5.
 */
export class RestartBackoff {
  private readonly bots = new Map<string, { restarts: number; lastMs: number }>();

  /** When the bot may be restarted again (ms since the epoch; 0: now). */
  notBefore(botId: string, now: number): number {
    const last = this.bots.get(botId);
    if (last === undefined || now - last.lastMs >= BACKOFF_RESET_MS) return 0;
    return last.lastMs + Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** (last.restarts - 1));
  }

  /** The bot is being restarted (by this agent or another that claimed it) at `now`. */
  restarted(botId: string, now: number): void {
    const last = this.bots.get(botId);
    const restarts = last !== undefined && now - last.lastMs < BACKOFF_RESET_MS ? last.restarts + 1 : 1;
    this.bots.set(botId, { restarts, lastMs: now });
  }

  /** Forgets the bots not restarted for BACKOFF_RESET_MS, so that the map holds only those backing off. */
  forgetSettled(now: number): void {
    for (const [botId, last] of this.bots) if (now - last.lastMs >= BACKOFF_RESET_MS) this.bots.delete(botId);
  }
}
