import type { BotHistory } from '../history/bot-history.js';
import type { UnhealthyEnd } from '../history/history-store.js';
import type { BotInfo, HealthStatus, RunningHealth, RuntimeDriver } from '../runtime/driver.js';
import { DEFAULT_HEARTBEAT_TTL_S } from './heartbeats.js';
import type { Heartbeats } from './heartbeats.js';
import { RestartBackoff } from './restart-backoff.js';

/** How long a bot may stay unhealthy before the watchdog restarts it, unless its creator said otherwise (docs/api.md §13). */
export const DEFAULT_GRACE_S = 30;
export { GRACE_MAX_S, GRACE_MIN_S } from '../runtime/health-policy.js';
/** How often the watchdog looks at every running bot. */
const TICK_MS = 1_000;
/** How often (in looks) the beats of removed bots are forgotten. */
const PRUNE_EVERY_TICKS = 60;
/** How long a claim that could not be asked (the history's store is away) waits before it is asked again. */
const CLAIM_RETRY_MS = 5_000;

/** A bot's health as the agent answers it (docs/api.md §13). */
export interface HealthView {
  readonly status: HealthStatus;
  /** What says so: the runtime's check (`exec`), the bot's heartbeats, or nothing. */
  readonly check: 'exec' | 'heartbeat' | null;
  /** Since when (ISO 8601), as far as the agent saw it. */
  readonly since: string | null;
  /** The last failing check's output, bounded; for heartbeats, how long none came. */
  readonly output: string | null;
}

interface Verdict {
  readonly status: HealthStatus;
  readonly check: 'exec' | 'heartbeat' | null;
  readonly sinceMs: number;
  /** For heartbeats that stopped: the last beat of this run, else its start (ms). */
  readonly lastBeatMs?: number;
}

/** What the watchdog holds of a bot judged unhealthy: that episode, and whether it was reported and acted on. */
interface Episode {
  readonly key: string;
  acted: boolean;
}

export interface WatchdogOptions {
  readonly defaultGraceMs?: number;
  readonly tickMs?: number;
  readonly report?: (what: string, err: unknown) => void;
  /** The bots this watchdog looks after; all when undefined (tests sharing one engine keep to their own). */
  readonly watches?: (botId: string) => boolean;
  /** False (AGENT_WATCHDOG=off): health is judged and reported, but no bot is restarted. */
  readonly acts?: boolean;
}

const NONE: HealthView = { status: 'none', check: null, since: null, output: null };

/**
 * Health of every running bot, from its runtime's check and its heartbeats, and the watchdog that acts on
 * it (docs/api.md §13): a bot unhealthy for longer than its grace is restarted, once per run, by one agent
 * (the `restarted` event's key in the shared history decides which). A runtime that restarts for a failed
 * check itself (the kubelet) is left to it: the watchdog then acts on heartbeats only.
 */
export class Watchdog {
  private verdicts = new Map<string, Verdict>();
  private readonly episodes = new Map<string, Episode>();
  private readonly backoff = new RestartBackoff();
  private timer: NodeJS.Timeout | undefined;
  private ticks = 0;
  private readonly defaultGraceMs: number;

  constructor(
    private readonly driver: RuntimeDriver,
    private readonly heartbeats: Heartbeats,
    private readonly history: BotHistory,
    /** Restarts the bot through the lifecycle (serialised with every other operation on it). */
    private readonly restart: (botId: string) => Promise<void>,
    private readonly options: WatchdogOptions = {},
  ) {
    this.defaultGraceMs = options.defaultGraceMs ?? DEFAULT_GRACE_S * 1000;
  }

  start(): void {
    this.timer ??= setInterval(() => this.tick(), this.options.tickMs ?? TICK_MS).unref();
  }

  close(): void {
    clearInterval(this.timer);
  }

  /** The bot's health now, from what the runtime said of it (`info`, read for this answer) and its heartbeats. */
  healthOf(info: BotInfo, now = Date.now()): HealthView {
    if (!info.running || info.startedAt === undefined) return NONE;
    const startedAtMs = info.startedAt.getTime();
    const known = this.verdicts.get(info.id);
    const sinceMs = known?.status === info.health.status ? known.sinceMs : startedAtMs;
    const verdict = this.judge({ botId: info.id, startedAtMs, status: info.health.status, sinceMs, policy: info.healthPolicy, createdAtMs: info.createdAt?.getTime() }, now);
    return this.view(info.id, verdict, info.health.output, now);
  }

  /** The bot's health as the watchdog last judged it (within a second), without its output: the console's table. */
  lastJudged(botId: string): HealthView {
    const verdict = this.verdicts.get(botId);
    return verdict ? { status: verdict.status, check: verdict.check, since: sinceOf(verdict), output: null } : NONE;
  }

  /** Running bots by health, as last judged. */
  counts(): Record<HealthStatus, number> {
    const counts: Record<HealthStatus, number> = { healthy: 0, unhealthy: 0, starting: 0, none: 0 };
    for (const verdict of this.verdicts.values()) counts[verdict.status]++;
    return counts;
  }

  /** Looks at every running bot once: reports those that turned unhealthy, restarts those past their grace. */
  tick(now = Date.now()): void {
    if (++this.ticks % PRUNE_EVERY_TICKS === 0) {
      this.forgetRemovedBots();
      this.backoff.forgetSettled(now);
    }
    const verdicts = new Map<string, Verdict>();
    for (const bot of this.driver.runningHealth()) {
      if (this.options.watches && !this.options.watches(bot.botId)) continue;
      const verdict = this.judge(bot, now);
      verdicts.set(bot.botId, verdict);
      if (verdict.status !== 'unhealthy' || verdict.check === null) {
        this.episodes.delete(bot.botId);
        continue;
      }
      const key = `${bot.botId}:${verdict.check}:${bot.startedAtMs}:${verdict.sinceMs}`;
      let episode = this.episodes.get(bot.botId);
      if (episode?.key !== key) {
        episode = { key, acted: false };
        this.episodes.set(bot.botId, episode);
        void this.turnedUnhealthy(bot.botId, key, verdict, now);
      }
      const graceMs = bot.policy.graceMs ?? this.defaultGraceMs;
      const leftToRuntime = (verdict.check === 'exec' && this.driver.restartsUnhealthy) || this.options.acts === false;
      if (!episode.acted && !leftToRuntime && now >= verdict.sinceMs + graceMs && now >= this.backoff.notBefore(bot.botId, now, bot.policy.restart)) {
        episode.acted = true;
        void this.act(bot, verdict, episode, now);
      }
    }
    for (const botId of this.episodes.keys()) if (!verdicts.has(botId)) this.episodes.delete(botId);
    this.verdicts = verdicts;
  }

  /** Beats of bots the runtime no longer lists go (not while its index is being built, when it lists none). */
  private forgetRemovedBots(): void {
    const listed = this.driver.listedBots();
    if (listed !== undefined) this.heartbeats.keepOnly(new Set(listed.map((bot) => bot.bot_id)));
  }

  /** A running bot's verdict: heartbeats that stopped come first, then the runtime's check. */
  private judge(bot: RunningHealth, now: number): Verdict {
    const latest = this.heartbeats.latest(bot.botId);
    // A beat from before the bot was made was an earlier bot's of the same id (removed, made again).
    const beat = latest !== undefined && latest.atMs >= (bot.createdAtMs ?? 0) ? latest : undefined;
    const ttlMs = beat === undefined ? bot.policy.heartbeatTtlMs : (beat.ttlMs ?? bot.policy.heartbeatTtlMs ?? DEFAULT_HEARTBEAT_TTL_S * 1000);
    if (ttlMs !== undefined) {
      // A beat of an earlier run does not speak for this one: the run's start is where waiting begins.
      const lastMs = Math.max(beat?.atMs ?? 0, bot.startedAtMs);
      if (now >= lastMs + ttlMs + this.heartbeats.margin) return { status: 'unhealthy', check: 'heartbeat', sinceMs: lastMs + ttlMs, lastBeatMs: lastMs };
    }
    if (bot.status === 'unhealthy' || bot.status === 'starting') return { status: bot.status, check: 'exec', sinceMs: bot.sinceMs };
    if (ttlMs !== undefined) {
      const beatThisRun = beat !== undefined && beat.atMs >= bot.startedAtMs;
      return beatThisRun ? { status: 'healthy', check: 'heartbeat', sinceMs: beat.atMs } : { status: 'starting', check: 'heartbeat', sinceMs: bot.startedAtMs };
    }
    return { status: bot.status, check: bot.status === 'none' ? null : 'exec', sinceMs: bot.sinceMs };
  }

  private view(botId: string, verdict: Verdict, checkOutput: string | null, now: number): HealthView {
    const output = verdict.check === 'heartbeat' ? heartbeatOutput(verdict, now) : verdict.status === 'healthy' || verdict.status === 'none' ? null : checkOutput;
    return { status: verdict.status, check: verdict.check, since: sinceOf(verdict), output };
  }

  /** The `unhealthy` event, with the failing check's output (one inspection of the bot). */
  private async turnedUnhealthy(botId: string, key: string, verdict: Verdict, now: number): Promise<void> {
    try {
      const output = await this.outputOf(botId, verdict, now);
      await this.history.turnedUnhealthy(botId, key, verdict.sinceMs, verdict.check ?? 'exec', output);
    } catch (err) {
      this.options.report?.(`the watchdog could not record that bot ${botId} turned unhealthy`, err);
    }
  }

  /**
   * Restarts a bot past its grace, if this agent is the one to (its claim kept the `restarted` event); a
   * claim that could not be asked (the store is away) is asked again on a later look.
   */
  private async act(bot: RunningHealth, verdict: Verdict, episode: Episode, now: number): Promise<void> {
    let claimed: boolean;
    try {
      // The run judged must still be the bot's: one stopped, or started again, meanwhile is left as it is now.
      const info = await this.driver.findBot(bot.botId);
      if (!info.running || info.startedAt?.getTime() !== bot.startedAtMs) return;
      const output = verdict.check === 'heartbeat' ? heartbeatOutput(verdict, now) : info.health.output;
      const unhealthy: UnhealthyEnd = { check: verdict.check ?? 'exec', output };
      claimed = await this.history.claimRestart(bot.botId, bot.startedAtMs, unhealthy, verdict.sinceMs);
      // Claimed here or by another agent, the run is being restarted: each agent backs off alike.
      this.backoff.restarted(bot.botId, now, bot.policy.restart);
    } catch (err) {
      this.options.report?.(`the watchdog could not claim the restart of unhealthy bot ${bot.botId}; it asks again in ${CLAIM_RETRY_MS / 1000} s`, err);
      setTimeout(() => (episode.acted = false), CLAIM_RETRY_MS).unref();
      return;
    }
    if (!claimed) return;
    await this.restart(bot.botId).catch((err: unknown) => this.options.report?.(`the watchdog's restart of unhealthy bot ${bot.botId} failed`, err));
  }

  private async outputOf(botId: string, verdict: Verdict, now: number): Promise<string | null> {
    if (verdict.check === 'heartbeat') return heartbeatOutput(verdict, now);
    const info = await this.driver.findBot(botId).catch(() => undefined);
    return info?.health.output ?? null;
  }
}

/** What a heartbeat verdict says in words: how long none came. */
function heartbeatOutput(verdict: Verdict, now: number): string | null {
  if (verdict.lastBeatMs === undefined) return null;
  return `no heartbeat for ${Math.round((now - verdict.lastBeatMs) / 1000)} s (since ${new Date(verdict.lastBeatMs).toISOString()})`;
}

/** Since when a verdict holds; none without a check. */
function sinceOf(verdict: Verdict): string | null {
  return verdict.status === 'none' ? null : new Date(verdict.sinceMs).toISOString();
}
