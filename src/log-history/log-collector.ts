import { NotFound } from '../errors.js';
import type { LogLine, RuntimeDriver } from '../runtime/driver.js';
import type { LogHistoryConfig } from '../config.js';
import type { LogStore, NewLine } from './log-store.js';

/** How often the running bots are looked at for one whose lines are not followed yet (a run that began). */
const SWEEP_MS = 2_000;
/** How often the retention runs. */
const RETENTION_MS = 60_000;
/** A kept line's longest text (characters); longer ones are cut, and say so. */
export const LINE_MAX = 16_384;
/** A bot whose follow failed is tried again after this, doubling up to RETRY_MAX_MS. */
const RETRY_FIRST_MS = 5_000;
const RETRY_MAX_MS = 5 * 60_000;
/** Secrets shorter than this are not masked: they would mask ordinary words. */
const SECRET_MIN = 8;

/** Lines a second a bot may have kept, in bursts of twice that (AGENT_LOG_HISTORY_RATE), and the retention. */
export type LogCollectorOptions = LogHistoryConfig;

/** A bot's fair share of the history: a token bucket, and the lines past it not kept yet said. */
interface Share {
  tokens: number;
  atMs: number;
  dropped: number;
  firstDroppedAt: number;
  lastDroppedAt: number;
}

/**
 * A JSON Web Token: three base64url parts, the first two JSON objects. A bot's PLATFORM_AGENT_TOKEN on Kubernetes
 * is one the kubelet projects and renews, which the agent never holds to mask by its value.
 */
const JWT = /eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{16,}/g;

/** Masks each secret in a line, and any JWT (docs/api.md §21): the longest secret first, so that one inside another goes whole. */
export function masker(secrets: readonly string[]): (text: string) => string {
  const masked = [...new Set(secrets.filter((secret) => secret.length >= SECRET_MIN))].sort((a, b) => b.length - a.length);
  return (text) => {
    const line = masked.reduce((kept, secret) => (kept.includes(secret) ? kept.split(secret).join('***') : kept), text);
    return line.includes('eyJ') ? line.replace(JWT, '***') : line;
  };
}

/**
 * A run's first lines may be stamped a moment before the start the runtime records (Docker records it once the
 * process runs): a line this close before a start is that run's.
 */
const RUN_START_SLACK_MS = 100;
/** Where a bot's first follow begins, before its run's recorded start: its first lines ... */
const FIRST_FOLLOW_BEFORE_MS = 2_000;
/** ... but no further back than this: a bot that ran long before its first follow (the history just turned on) is not read whole. */
const FIRST_FOLLOW_MAX_BACK_MS = 10 * 60_000;
/** New follows begun per sweep: an agent that starts beside thousands of bots opens their streams a few at a time. */
const FOLLOWS_PER_SWEEP = 100;

/** The start of the run a line written at `at` belongs to: the latest start not after it. */
function runOf(starts: readonly number[], at: number): number | null {
  let run: number | null = null;
  for (const start of starts) if (start - RUN_START_SLACK_MS <= at) run = start;
  return run;
}

/**
 * Follows every running bot's lines into the log history (docs/api.md §21): each run from where the history
 * ends (nothing kept twice, after the agent's restart too), its secrets masked, within the bot's fair share, and
 * applies the retention.
 */
export class LogCollector {
  private readonly following = new Map<string, AbortController>();
  private readonly shares = new Map<string, Share>();
  private readonly retries = new Map<string, { atMs: number; waitMs: number }>();
  /** The run starts of the bots followed now, oldest first: those told while a follow goes on count at once. */
  private readonly starts = new Map<string, number[]>();
  private readonly timers: NodeJS.Timeout[] = [];
  private closed = false;
  /** Told of each line kept, as kept (the alerts: docs/api.md §22). */
  private listener: ((botId: string, line: NewLine) => void) | undefined;

  constructor(
    private readonly driver: RuntimeDriver,
    readonly store: LogStore,
    private readonly options: LogCollectorOptions,
    private readonly report: (what: string, err: unknown) => void,
  ) {}

  /** The log database searches answer from, where one is configured (docs/api.md §21). */
  get databaseUrl(): string | undefined {
    return this.options.databaseUrl;
  }

  start(): void {
    this.store.start();
    this.timers.push(setInterval(() => this.sweep(), SWEEP_MS), setInterval(() => this.enforceRetention(), RETENTION_MS));
    for (const timer of this.timers) timer.unref();
    this.sweep();
  }

  /** Follows each running bot not followed yet; says the gaps of bots past their share. */
  sweep(nowMs = Date.now()): void {
    let begun = 0;
    for (const botId of this.driver.runningBots()) {
      if (begun >= FOLLOWS_PER_SWEEP) break;
      const retry = this.retries.get(botId);
      if (this.following.has(botId) || (retry !== undefined && retry.atMs > nowMs)) continue;
      begun += 1;
      void this.follow(botId);
    }
    for (const [botId, share] of this.shares) {
      if (share.dropped === 0) continue;
      const { dropped, firstDroppedAt, lastDroppedAt } = share;
      share.dropped = 0;
      this.store.append(botId, [
        {
          at: lastDroppedAt,
          run: runOf(this.store.runStarts(botId), lastDroppedAt),
          stream: 'agent',
          text: `[bot-agent] ${dropped} lines written from ${new Date(firstDroppedAt).toISOString()} to ${new Date(lastDroppedAt).toISOString()} not kept: past the bot's share of ${this.options.ratePerSecond} lines a second (AGENT_LOG_HISTORY_RATE)`,
        },
      ]);
    }
  }

  private enforceRetention(nowMs = Date.now()): void {
    try {
      for (const drop of this.store.enforce(this.options.retention, nowMs)) {
        const why = drop.why === 'days' ? `older than ${this.options.retention.days} days (AGENT_LOG_HISTORY_DAYS)` : 'past the history\'s bytes (AGENT_LOG_HISTORY_BOT_MB, AGENT_LOG_HISTORY_MB)';
        this.store.append(drop.botId, [
          { at: nowMs, run: null, stream: 'agent', text: `[bot-agent] ${drop.lines} lines written from ${new Date(drop.fromAt).toISOString()} to ${new Date(drop.toAt).toISOString()} dropped: ${why}` },
        ]);
      }
    } catch (err) {
      this.report('the log history\'s retention could not run', err);
    }
  }

  /** Whether the bot's share has room for a line now; else the line is counted as not kept. */
  private admit(botId: string, at: number, nowMs: number): boolean {
    const rate = this.options.ratePerSecond;
    const share = this.shares.get(botId) ?? { tokens: 2 * rate, atMs: nowMs, dropped: 0, firstDroppedAt: 0, lastDroppedAt: 0 };
    this.shares.set(botId, share);
    share.tokens = Math.min(2 * rate, share.tokens + ((nowMs - share.atMs) / 1_000) * rate);
    share.atMs = nowMs;
    if (share.tokens >= 1) {
      share.tokens -= 1;
      return true;
    }
    if (share.dropped === 0) share.firstDroppedAt = at;
    share.dropped += 1;
    share.lastDroppedAt = at;
    return false;
  }

  /** Follows the bot's current run from where its history ends, until the run ends. */
  private async follow(botId: string): Promise<void> {
    const abort = new AbortController();
    this.following.set(botId, abort);
    try {
      const bot = await this.driver.findBot(botId);
      if (!bot.running || bot.startedAt === undefined || this.closed) return;
      this.store.noteBot(botId, bot.ownerId);
      this.store.noteRun(botId, bot.startedAt.getTime());
      const starts = this.store.runStarts(botId);
      this.starts.set(botId, starts);
      const mask = masker((await this.driver.botSecrets?.(botId)) ?? []);
      const newest = await this.store.newest(botId);
      // Lines at the newest kept millisecond may be kept already: each such text is passed over as many times as it was kept.
      const keptAtNewest = new Map<string, number>();
      for (const text of newest?.texts ?? []) keptAtNewest.set(text, (keptAtNewest.get(text) ?? 0) + 1);
      const since = newest?.at ?? Math.max(bot.startedAt.getTime() - FIRST_FOLLOW_BEFORE_MS, Date.now() - FIRST_FOLLOW_MAX_BACK_MS);
      const keptText = (line: string): string => {
        const masked = mask(line);
        return masked.length > LINE_MAX ? `${masked.slice(0, LINE_MAX)} [bot-agent: ${masked.length - LINE_MAX} characters cut]` : masked;
      };
      const onLine = (line: LogLine): void => {
        const at = line.at.getTime();
        const text = keptText(line.line);
        if (newest !== undefined && at <= newest.at) {
          if (at < newest.at) return;
          const left = keptAtNewest.get(text) ?? 0;
          if (left > 0) {
            keptAtNewest.set(text, left - 1);
            return;
          }
        }
        if (!this.admit(botId, at, Date.now())) return;
        const kept: NewLine = { at, run: runOf(starts, at), stream: line.stream, text };
        this.store.append(botId, [kept]);
        this.listener?.(botId, kept);
      };
      // A millisecond before: the runtime's times are finer than the history's, and the newest one's other lines come too.
      await this.driver.followLogs(botId, { since: new Date(since - 1) }, onLine, abort.signal);
      this.retries.delete(botId);
    } catch (err) {
      if (this.closed || err instanceof NotFound) return;
      const waitMs = Math.min(RETRY_MAX_MS, (this.retries.get(botId)?.waitMs ?? RETRY_FIRST_MS / 2) * 2);
      this.retries.set(botId, { atMs: Date.now() + waitMs, waitMs });
      this.report(`bot ${botId}'s lines could not be followed into the log history; tried again in ${Math.round(waitMs / 1_000)} s`, err);
    } finally {
      this.following.delete(botId);
      this.starts.delete(botId);
    }
  }

  /** A run of the bot began (the history's `started` event): its lines are that run's, also those read before this is told. */
  runStarted(botId: string, startedAtMs: number): void {
    try {
      this.store.noteRun(botId, startedAtMs);
    } catch (err) {
      this.report(`bot ${botId}'s run start could not be kept in the log history`, err);
    }
    const starts = this.starts.get(botId);
    if (starts !== undefined && !starts.includes(startedAtMs)) {
      starts.push(startedAtMs);
      starts.sort((a, b) => a - b);
    }
  }

  /** Tells `listener` of each bot's line as it is kept. */
  listen(listener: (botId: string, line: NewLine) => void): void {
    this.listener = listener;
  }

  /** The bot is removed: its lines are no longer followed, and its history goes. */
  forget(botId: string): void {
    this.following.get(botId)?.abort();
    this.shares.delete(botId);
    this.retries.delete(botId);
    this.store.forget(botId);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const timer of this.timers) clearInterval(timer);
    for (const abort of this.following.values()) abort.abort();
    await this.store.close();
  }
}
