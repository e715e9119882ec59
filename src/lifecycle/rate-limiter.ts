import { TooManyRequests } from '../errors.js';
import type { SharedWindow } from '../shared/shared-state.js';

/** The window several agents share, and how long one question to it may take. */
export interface SharedCount {
  readonly window: SharedWindow;
  /** Past this, or on any fault of the database, operations are counted in this agent alone. */
  readonly timeoutMs: number;
  /** How long the agent counts alone after the shared window failed it, before it asks again. */
  readonly awayMs: number;
  readonly report?: (what: string, err: unknown) => void;
}

/**
 * At most `limit` operations per bot and asker within any `windowMs`: a
 * sliding window of the times of the operations let through. A bot's own
 * operations and the platform's are counted apart (docs/api.md §2), so that
 * nothing a bot does can use up the platform's stop or restart of it.
 *
 * With a `shared` window (agents sharing a database) the limit holds across
 * agents, and the database is asked only by calls that may act: a call past
 * the limit this agent counted itself, or within a refusal the shared window
 * gave, is refused from memory; and this agent asks about one key at a time,
 * so that a bot calling in a loop holds at most one connection of the pool.
 * While the database fails or is slow, operations are counted here alone.
 */
export class RateLimiter {
  /** The operations this agent let through, per key. */
  private readonly recent = new Map<string, number[]>();
  /** Until when the shared window said no, per key: nothing can leave the window before then. */
  private readonly refusedUntil = new Map<string, number>();
  /** The question about a key under way to the shared window. */
  private readonly asking = new Map<string, Promise<number | undefined>>();
  private sharedAwayUntil = 0;

  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
    private readonly shared?: SharedCount,
  ) {}

  /** Counts one operation on `botId` asked by `by`, or throws TooManyRequests saying when the next one may come. */
  async take(botId: string, by: 'bot' | 'platform' = 'platform'): Promise<void> {
    const key = `${by} ${botId}`;
    const waitMs = await this.takeKey(key);
    if (waitMs === undefined) return;
    const retryAfterS = Math.max(1, Math.ceil(waitMs / 1000));
    throw new TooManyRequests(
      `too many lifecycle operations on bot ${botId}: at most ${this.limit} in ${this.windowMs / 1000} s; retry in ${retryAfterS} s`,
      retryAfterS,
    );
  }

  private async takeKey(key: string): Promise<number | undefined> {
    for (;;) {
      const now = this.now();
      const known = this.refusalKnown(key, now);
      if (known !== undefined) return known;
      if (!this.shared || now < this.sharedAwayUntil) return this.letThrough(key, now);
      const asking = this.asking.get(key);
      if (asking === undefined) break;
      await asking;
    }
    const asking = this.askShared(key, this.shared).finally(() => this.asking.delete(key));
    this.asking.set(key, asking);
    return asking;
  }

  private async askShared(key: string, shared: SharedCount): Promise<number | undefined> {
    const now = this.now();
    let timer: NodeJS.Timeout | undefined;
    try {
      const waitMs = await Promise.race([
        shared.window(key, this.limit, this.windowMs, now),
        new Promise<never>((_resolve, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${shared.timeoutMs} ms`)), shared.timeoutMs);
        }),
      ]);
      if (waitMs !== undefined) {
        this.refusedUntil.set(key, now + waitMs);
        return waitMs;
      }
      this.letThrough(key, now);
      return undefined;
    } catch (err) {
      this.sharedAwayUntil = this.now() + shared.awayMs;
      shared.report?.('the shared rate limit did not answer; counting in this agent alone meanwhile', err);
      return this.letThrough(key, this.now());
    } finally {
      clearTimeout(timer);
    }
  }

  /** How long until the next operation under `key` may come, when what this agent knows already says no. */
  private refusalKnown(key: string, now: number): number | undefined {
    const until = this.refusedUntil.get(key);
    if (until !== undefined) {
      if (until > now) return until - now;
      this.refusedUntil.delete(key);
    }
    const times = this.recent.get(key);
    if (times === undefined) return undefined;
    while (times.length > 0 && (times[0] ?? now) <= now - this.windowMs) times.shift();
    if (times.length === 0) {
      this.recent.delete(key);
      return undefined;
    }
    return times.length >= this.limit ? (times[0] ?? now) + this.windowMs - now : undefined;
  }

  /** Counts an operation under `key` here, or says how long until one may come. */
  private letThrough(key: string, now: number): number | undefined {
    const known = this.refusalKnown(key, now);
    if (known !== undefined) return known;
    const times = this.recent.get(key) ?? [];
    times.push(now);
    this.recent.set(key, times);
    return undefined;
  }
}
