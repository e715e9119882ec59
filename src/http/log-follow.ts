import type { Context } from 'koa';
import { TooManyRequests } from '../errors.js';
import type { BotHistory } from '../history/bot-history.js';
import type { StoredEvent } from '../history/history-store.js';
import type { LogLine, LogsFrom, RuntimeDriver } from '../runtime/driver.js';
import { sseOf, SseStream } from './sse.js';

/** Live-log followers of one bot, and of all bots, at most (CONTRACT.md §10). */
export const MAX_FOLLOWERS_PER_BOT = 10;
export const MAX_FOLLOWERS = 200;
/** The runtime's times may lag the agent's clock this much (Kubernetes gives whole seconds). */
const CLOCK_SLACK_MS = 1_000;

/** Counts live-log followers, per bot and in all. */
class Followers {
  private total = 0;
  private readonly perBot = new Map<string, number>();

  /** Takes a place for a follower of `botId`; the function it returns gives it back. */
  take(botId: string): () => void {
    const ofBot = this.perBot.get(botId) ?? 0;
    if (ofBot >= MAX_FOLLOWERS_PER_BOT) {
      throw new TooManyRequests(`too many log followers of bot ${botId} (at most ${MAX_FOLLOWERS_PER_BOT})`, 1);
    }
    if (this.total >= MAX_FOLLOWERS) throw new TooManyRequests(`too many log followers (at most ${MAX_FOLLOWERS} in all)`, 1);
    this.perBot.set(botId, ofBot + 1);
    this.total += 1;
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.total -= 1;
      const left = (this.perBot.get(botId) ?? 1) - 1;
      if (left === 0) this.perBot.delete(botId);
      else this.perBot.set(botId, left);
    };
  }
}

/**
 * Follows a bot's logs across its runs (CONTRACT.md §10): the current run's
 * last lines and new ones; when the run ends, its `exited` event; when the
 * next run starts, every line since its start.
 */
async function followAcrossRuns(stream: SseStream, driver: RuntimeDriver, history: BotHistory, botId: string, lines: number) {
  const pending: StoredEvent[] = [];
  let wake: (() => void) | undefined;
  const unfollow = history.follow((event) => {
    if (event.botId !== botId || (event.type !== 'exited' && event.type !== 'started')) return;
    pending.push(event);
    wake?.();
  });
  const sendLine = (line: LogLine): void => {
    stream.send({ event: 'log', data: JSON.stringify({ line: line.line, stream: line.stream, at: line.at.toISOString() }) });
  };
  try {
    let from: LogsFrom = { lines };
    let lastEnd: Date | undefined;
    while (!stream.closed) {
      // Runs that began, or ended, before this following did are in what it reads already.
      const following = Date.now() - CLOCK_SLACK_MS;
      await driver.followLogs(botId, from, sendLine, stream.signal);
      // The run ended (or none runs): pass on its end, and follow the next run from its start.
      let next: Date | undefined;
      while (!stream.closed && next === undefined) {
        const event = pending.shift();
        if (!event) {
          await new Promise<void>((resolve) => {
            wake = resolve;
            stream.signal.addEventListener('abort', () => resolve(), { once: true });
          });
          wake = undefined;
          continue;
        }
        const { at } = JSON.parse(event.data) as { at: string };
        if (Date.parse(at) < following) continue;
        if (event.type === 'exited') {
          stream.send(sseOf(event));
          lastEnd = new Date(at);
        } else next = new Date(at);
      }
      // A process may write before the runtime records its start: the next run's lines are those after the last end.
      const end = lastEnd ?? lastExitOf(history, botId);
      if (next) from = { since: end && end.getTime() < next.getTime() ? new Date(end.getTime() + 1) : new Date(next.getTime() - 1_000) };
    }
  } finally {
    unfollow();
  }
}

/** When the bot's last recorded run ended. */
function lastExitOf(history: BotHistory, botId: string): Date | undefined {
  const at = history.exits(botId, 1)[0]?.at;
  return at === undefined ? undefined : new Date(at);
}

/** GET /api/bots/{bot_id}/logs?follow=true: live logs, within the follower limits. */
export class LogFollowing {
  private readonly followers = new Followers();

  constructor(
    private readonly driver: RuntimeDriver,
    private readonly history: BotHistory,
  ) {}

  /** Checks that the bot exists and a follower's place is free, then streams; errors before the stream are the envelope's. */
  async follow(ctx: Context, botId: string, lines: number): Promise<void> {
    await this.driver.findBot(botId);
    const release = this.followers.take(botId);
    const stream = new SseStream(ctx);
    void followAcrossRuns(stream, this.driver, this.history, botId, lines)
      .catch(() => undefined)
      .finally(() => {
        release();
        stream.close();
      });
  }
}
