import { TooManyRequests } from '../errors.js';

interface Bucket {
  tokens: number;
  at: number;
}

/** Past this many bots with a bucket, full buckets (bots that have not read lately) are let go. */
const PRUNE_AT = 10_000;

/**
 * The reads a bot may make of itself (CONTRACT.md §2): a token bucket per bot
 * that fills at `perSecond` and holds twice that, so that a bot may burst.
 * A bot reading as fast as it can is refused at once, before any runtime call.
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

  /** Counts one read by `botId`, or throws TooManyRequests saying when the next may come. */
  take(botId: string): void {
    const now = this.now();
    const bucket = this.buckets.get(botId) ?? { tokens: this.capacity, at: now };
    bucket.tokens = Math.min(this.capacity, bucket.tokens + ((now - bucket.at) / 1000) * this.perSecond);
    bucket.at = now;
    if (bucket.tokens < 1) {
      const retryAfterS = Math.max(1, Math.ceil((1 - bucket.tokens) / this.perSecond));
      throw new TooManyRequests(
        `too many reads by bot ${botId}: at most ${this.perSecond} a second (bursts of ${this.capacity}); retry in ${retryAfterS} s`,
        retryAfterS,
      );
    }
    bucket.tokens -= 1;
    if (!this.buckets.has(botId) && this.buckets.size >= PRUNE_AT) this.prune(now);
    this.buckets.set(botId, bucket);
  }

  private prune(now: number): void {
    for (const [botId, bucket] of this.buckets) {
      if (bucket.tokens + ((now - bucket.at) / 1000) * this.perSecond >= this.capacity) this.buckets.delete(botId);
    }
  }
}
