import type { Context } from 'koa';
import type { BotHistory } from '../history/bot-history.js';
import type { StoredEvent } from '../history/history-store.js';
import type { LogLine, LogsFrom, RuntimeDriver } from '../runtime/driver.js';
import { sseOf } from './sse.js';
import type { SseStream } from './sse.js';
import type { StreamLimits } from './stream-limits.js';

/** The runtime's times may lag the agent's clock this much (Kubernetes gives whole seconds). */
const CLOCK_SLACK_MS = 1_000;
/** The longest a run's end waits for the stream of its lines to end. */
const HELD_END_MAX_MS = 10_000;

/**
 * Follows a bot's logs across its runs (docs/api.md §10): the current run's
 * last lines and new ones; when the run ends, its `exited` event; when the
 * next run starts, every line since its start.
 */
async function followAcrossRuns(stream: SseStream, driver: RuntimeDriver, history: BotHistory, botId: string, lines: number) {
  // Runs that began, or ended, before this following did are in what it reads first.
  const beginning = Date.now() - CLOCK_SLACK_MS;
  let lastEnd: number | undefined;
  const starts: number[] = [];
  let wake: (() => void) | undefined;
  // A run's end is kept while the run's lines are still read (under load the runtime's stream lags, and the
  // end may be recorded first): it is sent once that stream has ended, between the run's last line and the
  // next run's first (the runtime ends a stream at the next run's first line).
  let reading = false;
  const heldEnds: StoredEvent[] = [];
  // A stream that goes on long after its run ended (none should) holds no end for longer than this.
  let heldTooLong: NodeJS.Timeout | undefined;
  const sendHeldEnds = (): void => {
    clearTimeout(heldTooLong);
    heldTooLong = undefined;
    for (const end of heldEnds.splice(0)) stream.send(sseOf(end));
  };
  const unfollow = history.follow((event) => {
    if (event.botId !== botId || (event.type !== 'exited' && event.type !== 'started')) return;
    const at = Date.parse((JSON.parse(event.data) as { at: string }).at);
    if (at < beginning) return;
    if (event.type === 'exited') {
      if (reading) {
        heldEnds.push(event);
        heldTooLong ??= setTimeout(sendHeldEnds, HELD_END_MAX_MS);
      } else stream.send(sseOf(event));
      lastEnd = Math.max(lastEnd ?? at, at);
    } else starts.push(at);
    wake?.();
  });
  // The runtime may end a stream only after it has sent some of the next run's lines: reading that run
  // again from its start must not send them twice. Lines carry millisecond times: those of the last
  // millisecond sent are told apart by their text.
  let lastAt = 0;
  const atLastAt = new Set<string>();
  /** Set while a run is read again from its start, until its lines pass the last one sent. */
  let catchingUp = false;
  const sendLine = (line: LogLine): void => {
    const at = line.at.getTime();
    if (catchingUp) {
      if (at < lastAt || (at === lastAt && atLastAt.has(line.line))) return;
      catchingUp = false;
    }
    if (at > lastAt) atLastAt.clear();
    lastAt = at;
    atLastAt.add(line.line);
    stream.send({ event: 'log', data: JSON.stringify({ line: line.line, stream: line.stream, at: line.at.toISOString() }) });
  };
  /**
   * Whether a run that started at `at` follows what was read. Not strictly after an end: Kubernetes gives
   * times to the second, and the kubelet starts a run again in the second its last one ended. With no end
   * seen yet, only a start after every line sent: under load the start of the run just read may be told
   * after its lines (and its end later still), and is no next run.
   */
  const followsRead = (at: number): boolean => (lastEnd !== undefined ? at >= lastEnd : at >= beginning && at > lastAt);
  /** The start of the first run that has not ended yet, once there is one. */
  const nextRun = async (): Promise<number | undefined> => {
    while (!stream.closed) {
      const next = starts.find(followsRead);
      // A start not taken yet may be once an end is seen; one before the last end never will.
      const kept = next === undefined ? starts.filter((at) => at >= (lastEnd ?? beginning)) : [];
      starts.splice(0, starts.length, ...kept);
      if (next !== undefined) return next;
      await new Promise<void>((resolve) => {
        wake = resolve;
        stream.signal.addEventListener('abort', () => resolve(), { once: true });
      });
      wake = undefined;
    }
    return undefined;
  };
  try {
    let from: LogsFrom = { lines };
    while (!stream.closed) {
      reading = true;
      try {
        await driver.followLogs(botId, from, sendLine, stream.signal);
      } finally {
        reading = false;
        sendHeldEnds();
      }
      const next = await nextRun();
      if (next === undefined) return;
      // A process may write before the runtime records its start: the next run's lines are those after the last end.
      const end = lastEnd ?? (await history.lastEnd(botId))?.getTime();
      from = { since: new Date(end !== undefined && end < next ? end + 1 : next - 1_000) };
      catchingUp = true;
    }
  } finally {
    clearTimeout(heldTooLong);
    unfollow();
  }
}

/** GET /api/bots/{bot_id}/logs?follow=true: live logs, within the stream limits. */
export class LogFollowing {
  constructor(
    private readonly driver: RuntimeDriver,
    private readonly history: BotHistory,
    private readonly streams: StreamLimits,
  ) {}

  /** Checks that the bot exists and a stream's place is free, then streams; errors before the stream are the envelope's. */
  async follow(ctx: Context, botId: string, lines: number, byBot: boolean): Promise<void> {
    await this.driver.findBot(botId);
    const stream = this.streams.open(ctx, botId, byBot);
    void followAcrossRuns(stream, this.driver, this.history, botId, lines)
      .catch(() => undefined)
      .finally(() => stream.close());
  }
}
