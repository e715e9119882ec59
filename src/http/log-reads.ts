import type { Context } from 'koa';
import onFinished from 'on-finished';
import { TooManyRequests } from '../errors.js';

/** Logs reads of one bot in flight at once, whoever reads (docs/api.md §2) ... */
export const LOG_READS_PER_BOT = 4;
/**
 * ... and of all bots together: the memory budget of reads. One read holds at most about 4 MiB of the
 * bot's output and a few copies of it while it answers (text, JSON, the socket's buffer), up to some
 * 24 MiB for the largest: this many at once stay well inside the chart's 256 MiB with everything else.
 */
export const LOG_READS_IN_ALL = 6;
/** Of those, the places the platform keeps: bots' reads hold at most the rest, whatever they do. */
export const PLATFORM_LOG_READS = 2;
/** How long a read may wait for its turn before its 429. */
export const LOG_READ_WAIT_MS = 2_000;
/**
 * How long an answer may take to leave: a client that does not read it is cut off, so that it holds its
 * place no longer. A bot reads over the host's own network: 5 s carry the largest answer many times over.
 */
export const BOT_LOG_SEND_MS = 5_000;
export const PLATFORM_LOG_SEND_MS = 30_000;

/** Places taken and readers waiting in line, first come first served. */
class Places {
  taken = 0;
  readonly waiting: Array<() => void> = [];

  constructor(readonly size: number) {}

  /** Takes a place, waiting up to `ms`; false when none came. */
  async take(ms: number): Promise<boolean> {
    if (this.taken < this.size && this.waiting.length === 0) {
      this.taken += 1;
      return true;
    }
    return new Promise((resolve) => {
      const turn = (): void => {
        clearTimeout(timer);
        this.taken += 1;
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.waiting.splice(this.waiting.indexOf(turn), 1);
        resolve(false);
      }, ms);
      this.waiting.push(turn);
    });
  }

  give(): void {
    this.taken -= 1;
    this.waiting.shift()?.();
  }

  get idle(): boolean {
    return this.taken === 0 && this.waiting.length === 0;
  }
}

/**
 * Bounds logs reads (not live logs, which are streams): LOG_READS_PER_BOT of
 * one bot, whoever reads, and LOG_READS_IN_ALL in all at once, of which bots'
 * own reads hold at most all but PLATFORM_LOG_READS: two bots that never take
 * their answers cannot keep the platform from reading. More wait their turn for
 * LOG_READ_WAIT_MS, then get 429 `too many reads`. A read keeps its place until
 * its answer has left, or its client was cut off for not taking it (a bot after
 * BOT_LOG_SEND_MS, the platform after PLATFORM_LOG_SEND_MS).
 */
export class LogReads {
  private readonly perBot = new Map<string, Places>();
  private readonly inAll: Places;
  private readonly ofBots: Places;

  constructor(
    private readonly perBotSize = LOG_READS_PER_BOT,
    inAllSize = LOG_READS_IN_ALL,
    private readonly waitMs = LOG_READ_WAIT_MS,
    platformSize = PLATFORM_LOG_READS,
  ) {
    this.inAll = new Places(inAllSize);
    this.ofBots = new Places(inAllSize - platformSize);
  }

  /**
   * Takes a place for a logs read of `botId` answered on `ctx` (by the bot itself
   * when `byBot`), given back once the answer has left; TooManyRequests when none came in time.
   */
  async enter(ctx: Context, botId: string, byBot: boolean): Promise<void> {
    let ofBot = this.perBot.get(botId);
    if (!ofBot) {
      ofBot = new Places(this.perBotSize);
      this.perBot.set(botId, ofBot);
    }
    const deadline = Date.now() + this.waitMs;
    const left = (): number => Math.max(0, deadline - Date.now());
    const taken: Places[] = [];
    const leave = (): void => {
      for (const places of taken.reverse()) places.give();
      this.forgetIfIdle(botId, ofBot);
    };
    if (!(await ofBot.take(left()))) {
      leave();
      throw this.refusal(`at most ${this.perBotSize} reads of bot ${botId}'s logs run at once`);
    }
    taken.push(ofBot);
    if (byBot) {
      if (!(await this.ofBots.take(left()))) {
        leave();
        throw this.refusal(`at most ${this.ofBots.size} logs reads by bots run at once`);
      }
      taken.push(this.ofBots);
    }
    if (!(await this.inAll.take(left()))) {
      leave();
      throw this.refusal(`at most ${this.inAll.size} logs reads run at once`);
    }
    taken.push(this.inAll);
    ctx.res.setTimeout(byBot ? BOT_LOG_SEND_MS : PLATFORM_LOG_SEND_MS, () => ctx.res.destroy());
    onFinished(ctx.res, leave);
  }

  private forgetIfIdle(botId: string, ofBot: Places): void {
    if (ofBot.idle && this.perBot.get(botId) === ofBot) this.perBot.delete(botId);
  }

  private refusal(why: string): TooManyRequests {
    return new TooManyRequests(`too many reads: ${why}; retry in 1 s`, 1);
  }
}
