import { TooManyRequests } from '../errors.js';

/**
 * Where operations let through are counted, shared by several agents: lets one
 * more through under `key` (undefined), or answers how many ms until the next may come.
 */
export type SharedWindow = (key: string, limit: number, windowMs: number, nowMs: number) => Promise<number | undefined>;

/**
 * At most `limit` operations per bot and asker within any `windowMs`: a
 * sliding window of the times of the operations let through. A bot's own
 * operations and the platform's are counted apart (docs/api.md §2), so that
 * nothing a bot does can use up the platform's stop or restart of it. With a
 * `shared` window (agents sharing a database) the limit holds across agents.
 */
export class RateLimiter {
  private readonly recent = new Map<string, number[]>();

  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
    private readonly shared?: SharedWindow,
  ) {}

  /** Counts one operation on `botId` asked by `by`, or throws TooManyRequests saying when the next one may come. */
  async take(botId: string, by: 'bot' | 'platform' = 'platform'): Promise<void> {
    const key = `${by} ${botId}`;
    const now = this.now();
    const waitMs = this.shared ? await this.shared(key, this.limit, this.windowMs, now) : this.takeHere(key, now);
    if (waitMs === undefined) return;
    const retryAfterS = Math.max(1, Math.ceil(waitMs / 1000));
    throw new TooManyRequests(
      `too many lifecycle operations on bot ${botId}: at most ${this.limit} in ${this.windowMs / 1000} s; retry in ${retryAfterS} s`,
      retryAfterS,
    );
  }

  private takeHere(key: string, now: number): number | undefined {
    const times = (this.recent.get(key) ?? []).filter((time) => time > now - this.windowMs);
    this.recent.set(key, times);
    if (times.length >= this.limit) return (times[0] ?? now) + this.windowMs - now;
    times.push(now);
    return undefined;
  }
}
