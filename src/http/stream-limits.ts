import type { Context } from 'koa';
import { TooManyRequests } from '../errors.js';
import { SseStream } from './sse.js';

/** Streams (live logs and events) open on one bot, whoever opened them, and in all, at most (docs/api.md §2). */
export const MAX_STREAMS_PER_BOT = 10;
export const MAX_STREAMS = 200;
/** What every stream's unread bytes may add up to: past it, the streams furthest behind are cut first. */
export const MAX_UNREAD_IN_ALL = 32 * 1024 * 1024;

/**
 * The one bound on Server-Sent Event streams: a place per stream, per bot and
 * in all, given back the moment the stream closes (its client left, or it was
 * cut off); and one budget of bytes written but not yet read by any client, so
 * that 200 slow readers cannot make the agent hold 200 MiB for them.
 */
export class StreamLimits {
  private total = 0;
  private readonly perBot = new Map<string, number>();
  /** Bytes the streams' sockets hold unread, as each stream last counted them. */
  unread = 0;

  constructor(
    private readonly maxPerBot = MAX_STREAMS_PER_BOT,
    private readonly maxInAll = MAX_STREAMS,
    readonly maxUnreadInAll = MAX_UNREAD_IN_ALL,
  ) {}

  /** Opens a stream on `ctx` for `botId` (undefined: every bot's, counted in all only); TooManyRequests when no place is free. */
  open(ctx: Context, botId: string | undefined): SseStream {
    const ofBot = botId === undefined ? 0 : (this.perBot.get(botId) ?? 0);
    if (botId !== undefined && ofBot >= this.maxPerBot) {
      throw new TooManyRequests(`too many streams open on bot ${botId} (at most ${this.maxPerBot} live logs and events)`, 1);
    }
    if (this.total >= this.maxInAll) throw new TooManyRequests(`too many streams open (at most ${this.maxInAll} in all)`, 1);
    this.total += 1;
    if (botId !== undefined) this.perBot.set(botId, ofBot + 1);
    const stream = new SseStream(ctx, this);
    void stream.ended().then(() => this.release(botId));
    return stream;
  }

  /** How many streams are open, on `botId` or in all. */
  count(botId?: string): number {
    return botId === undefined ? this.total : (this.perBot.get(botId) ?? 0);
  }

  private release(botId: string | undefined): void {
    this.total -= 1;
    if (botId === undefined) return;
    const left = (this.perBot.get(botId) ?? 1) - 1;
    if (left === 0) this.perBot.delete(botId);
    else this.perBot.set(botId, left);
  }
}
