import { TooManyRequests } from '../errors.js';

/**
 * At most `limit` operations per bot and asker within any `windowMs`: a
 * sliding window of the times of the operations let through. A bot's own
 * operations and the platform's are counted apart (CONTRACT.md §2), so that
 * nothing a bot does can use up the platform's stop or restart of it.
 */
export class RateLimiter {
  private readonly recent = new Map<string, number[]>();

  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Counts one operation on `botId` asked by `by`, or throws TooManyRequests saying when the next one may come. */
  take(botId: string, by: 'bot' | 'platform' = 'platform'): void {
    const key = `${by} ${botId}`;
    const now = this.now();
    const times = (this.recent.get(key) ?? []).filter((time) => time > now - this.windowMs);
    if (times.length >= this.limit) {
      this.recent.set(key, times);
      const retryAfterS = Math.max(1, Math.ceil(((times[0] ?? now) + this.windowMs - now) / 1000));
      throw new TooManyRequests(
        `too many lifecycle operations on bot ${botId}: at most ${this.limit} in ${this.windowMs / 1000} s; retry in ${retryAfterS} s`,
        retryAfterS,
      );
    }
    times.push(now);
    this.recent.set(key, times);
  }
}
