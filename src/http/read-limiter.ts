import { TooManyRequests } from '../errors.js';

interface Bucket {
  tokens: number;
  at: number;
}

/** Past this many bots with a bucket, full buckets (bots that have not read lately) are let go. */
const PRUNE_AT = 10_000;
/** The longest a refused read is held before its 429. */
const MAX_HOLD_MS = 1_000;

/** Log lines that count as one read: the engine's work grows with the lines it reads. */
export const LINES_PER_READ = 1_000;

/** What a read of `lines` log lines counts as: one read for each started LINES_PER_READ. */
export function logReadCost(lines: number): number {
  return Math.max(1, Math.ceil(lines / LINES_PER_READ));
}

/**
 * The reads a bot may make of itself (docs/api.md §2): a token bucket per bot
 * that fills at `perSecond` and holds twice that, so that a bot may burst.
 * A read may count as more than one (a logs read of many lines: logReadCost),
 * so that what one bot makes the runtime do stays bounded, not just how often.
 * A refused read costs no runtime call, and its 429 is held back until the
 * time its Retry-After names (at most a second): a bot that ignores Retry-After
 * and reads in a loop waits as if it had not, instead of spinning on refusals
 * that take the CPU other callers need.
 */
export class ReadLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly capacity: number;

  constructor(
    private readonly perSecond: number,
    private readonly now: () => number = Date.now,
  ) {
    this.capacity = 2 * perSecond;
  }

  /** Counts a read of `cost` by `botId`, or (after holding it back) throws TooManyRequests saying when it may come. */
  async take(botId: string, cost = 1): Promise<void> {
    try {
      this.count(botId, cost);
    } catch (err) {
      if (err instanceof TooManyRequests) await new Promise((resolve) => setTimeout(resolve, Math.min(MAX_HOLD_MS, err.retryAfterS * 1000)));
      throw err;
    }
  }

  /** Counts a read of `cost` by `botId`, or throws TooManyRequests at once. */
  count(botId: string, cost = 1): void {
    const now = this.now();
    const bucket = this.buckets.get(botId) ?? { tokens: this.capacity, at: now };
    bucket.tokens = Math.min(this.capacity, bucket.tokens + ((now - bucket.at) / 1000) * this.perSecond);
    bucket.at = now;
    if (bucket.tokens < cost) {
      const retryAfterS = Math.max(1, Math.ceil((cost - bucket.tokens) / this.perSecond));
      throw new TooManyRequests(
        `too many reads by bot ${botId}: at most ${this.perSecond} a second (bursts of ${this.capacity}); retry in ${retryAfterS} s`,
        retryAfterS,
      );
    }
    bucket.tokens -= cost;
    if (!this.buckets.has(botId) && this.buckets.size >= PRUNE_AT) this.prune(now);
    this.buckets.set(botId, bucket);
  }

  private prune(now: number): void {
    for (const [botId, bucket] of this.buckets) {
      if (bucket.tokens + ((now - bucket.at) / 1000) * this.perSecond >= this.capacity) this.buckets.delete(botId);
    }
  }
}
