import type { Context } from 'koa';
import { TooManyRequests } from '../errors.js';
import { SseStream } from './sse.js';

/** Streams (live logs and events) open on one bot, whoever opened them, and in all, at most (docs/api.md §2). */
export const MAX_STREAMS_PER_BOT = 10;
export const MAX_STREAMS = 200;
/** Of those, the places the platform keeps: bots' own streams hold at most the rest. */
export const PLATFORM_STREAMS = 50;
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
  /** Streams a bot opened (on itself). */
  private ofBots = 0;
  private readonly perBot = new Map<string, number>();
  /** Bytes the streams' sockets hold unread, as each stream last counted them. */
  unread = 0;

  constructor(
    private readonly maxPerBot = MAX_STREAMS_PER_BOT,
    private readonly maxInAll = MAX_STREAMS,
    readonly maxUnreadInAll = MAX_UNREAD_IN_ALL,
    private readonly platformKeeps = PLATFORM_STREAMS,
  ) {}

  /**
   * Opens a stream on `ctx` for `botId` (undefined: every bot's, counted in all
   * only), opened by the bot itself when `byBot`; TooManyRequests when no place is free.
   */
  open(ctx: Context, botId: string | undefined, byBot = false): SseStream {
    const ofBot = botId === undefined ? 0 : (this.perBot.get(botId) ?? 0);
    if (botId !== undefined && ofBot >= this.maxPerBot) {
      throw new TooManyRequests(`too many streams open on bot ${botId} (at most ${this.maxPerBot} live logs and events)`, 1);
    }
    if (this.total >= this.maxInAll) throw new TooManyRequests(`too many streams open (at most ${this.maxInAll} in all)`, 1);
    if (byBot && this.ofBots >= this.maxInAll - this.platformKeeps) {
      throw new TooManyRequests(`too many streams open by bots (at most ${this.maxInAll - this.platformKeeps}; the platform keeps ${this.platformKeeps})`, 1);
    }
    this.total += 1;
    if (byBot) this.ofBots += 1;
    if (botId !== undefined) this.perBot.set(botId, ofBot + 1);
    const stream = new SseStream(ctx, this);
    void stream.ended().then(() => this.release(botId, byBot));
    return stream;
  }

  /** How many streams are open, on `botId` or in all. */
  count(botId?: string): number {
    return botId === undefined ? this.total : (this.perBot.get(botId) ?? 0);
  }

  private release(botId: string | undefined, byBot: boolean): void {
    this.total -= 1;
    if (byBot) this.ofBots -= 1;
    if (botId === undefined) return;
    const left = (this.perBot.get(botId) ?? 1) - 1;
    if (left === 0) this.perBot.delete(botId);
    else this.perBot.set(botId, left);
  }
}
