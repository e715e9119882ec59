import type { RestartPolicy } from '../runtime/driver.js';

/** The first wait between two of the watchdog's restarts of one bot, the most it grows to, and when it is forgotten. */
export const BACKOFF_FIRST_MS = 10_000;
export const BACKOFF_MAX_MS = 300_000;
export const BACKOFF_RESET_MS = 600_000;

/**
 * How long the watchdog waits before it restarts a bot again, as the kubelet does for a crashing container
 * (docs/api.md §13): nothing before the first restart, then 10 s, doubling each time, at most 5 minutes;
 * a bot not restarted for 10 minutes starts again from nothing. However short its check's grace (an image's
 * own labels included), a bot is restarted at most 5 times in 5 minutes, then once every 5. A bot's restart
 * policy may name its own first wait and its most (`backoff_s`, `backoff_max_s`); it is forgotten after twice
 * the most, at least 10 minutes.
 */
export class RestartBackoff {
  private readonly bots = new Map<string, { restarts: number; lastMs: number; resetMs: number }>();

  /** When the bot may be restarted again (ms since the epoch; 0: now). */
  notBefore(botId: string, now: number, policy?: RestartPolicy): number {
    const last = this.bots.get(botId);
    if (last === undefined || now - last.lastMs >= resetAfterMs(policy)) return 0;
    const firstMs = policy?.backoffFirstMs ?? BACKOFF_FIRST_MS;
    return last.lastMs + Math.min(policy?.backoffMaxMs ?? BACKOFF_MAX_MS, firstMs * 2 ** Math.min(last.restarts - 1, 30));
  }

  /** The bot is being restarted (by this agent or another that claimed it) at `now`. */
  restarted(botId: string, now: number, policy?: RestartPolicy): void {
    const last = this.bots.get(botId);
    const restarts = last !== undefined && now - last.lastMs < resetAfterMs(policy) ? last.restarts + 1 : 1;
    this.bots.set(botId, { restarts, lastMs: now, resetMs: resetAfterMs(policy) });
  }

  /** Forgets the bots not restarted for their reset time, so that the map holds only those backing off. */
  forgetSettled(now: number): void {
    for (const [botId, last] of this.bots) if (now - last.lastMs >= last.resetMs) this.bots.delete(botId);
  }
}

/** How long without a restart a bot's back-off starts again from nothing. */
function resetAfterMs(policy: RestartPolicy | undefined): number {
  return policy === undefined ? BACKOFF_RESET_MS : Math.max(BACKOFF_RESET_MS, 2 * policy.backoffMaxMs);
}
