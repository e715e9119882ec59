import { lineMatcher } from '../log-history/line-match.js';
import { mapLimited } from '../map-limited.js';
import type { BotStats, RuntimeDriver } from '../runtime/driver.js';
import type { AlertStore, StoredAlert } from './alert-store.js';

/** How often the rules are read again (another agent may have changed them), and usage and silence looked at. */
const REFRESH_MS = 5_000;
const CHECK_MS = 5_000;
/** A line alert carries at most this many of the lines that matched, gathered within LINE_GATHER_MS. */
export const MATCHED_LINES_MAX = 5;
const LINE_GATHER_MS = 1_000;
/** A claim another agent won is not asked again for this long (or the cooldown, if shorter). */
const LOST_CLAIM_PAUSE_MS = 10_000;
/** Bots' usage read at once, for the rules over every bot. */
const STATS_AT_ONCE = 16;

/** A line as the alerts see it: kept in the history, its secrets masked. */
export interface AlertLine {
  readonly at: number;
  readonly stream: 'stdout' | 'stderr' | 'agent';
  readonly text: string;
}

interface LineRule {
  readonly rule: StoredAlert;
  readonly matches: (text: string) => boolean;
}

/**
 * Fires the alert rules (docs/api.md §22): lines that match as they are kept; CPU or memory above a threshold
 * for a whole window, and no line for a while, looked at every few seconds. A rule fires for a bot once per
 * cooldown, across every agent that shares the database (the claim in AlertStore).
 */
export class Alerting {
  private rules: readonly StoredAlert[] = [];
  private lineRules: readonly LineRule[] = [];
  private readonly lastLineMs = new Map<string, number>();
  /** Since when a usage rule's bot has been above its threshold. */
  private readonly aboveSince = new Map<string, number>();
  /** Lines matched and not yet told, by rule and bot. */
  private readonly gathered = new Map<string, { rule: StoredAlert; botId: string; lines: string[] }>();
  /** Until when this agent asks no claim of a rule and bot (it fired, or another agent did). */
  private readonly quietUntil = new Map<string, number>();
  private readonly timers: NodeJS.Timeout[] = [];
  private gatherTimer: NodeJS.Timeout | undefined;
  private readonly startedMs = Date.now();
  private checking = false;

  constructor(
    private readonly store: AlertStore,
    private readonly driver: RuntimeDriver,
    private readonly fire: (botId: string, fields: Record<string, unknown>) => Promise<void>,
    private readonly report: (what: string, err: unknown) => void,
  ) {}

  start(): void {
    void this.refresh();
    this.timers.push(
      setInterval(() => void this.refresh(), REFRESH_MS),
      setInterval(() => void this.check(), CHECK_MS),
    );
    for (const timer of this.timers) timer.unref();
  }

  /** Reads the rules again (after a change through this agent, at once). */
  async refresh(): Promise<void> {
    try {
      this.rules = await this.store.all();
      this.lineRules = this.rules.filter((rule) => rule.kind === 'line').map((rule) => ({ rule, matches: lineMatcher(rule.q, rule.regex) ?? (() => true) }));
    } catch (err) {
      this.report('the alert rules could not be read', err);
    }
  }

  /** A line the history kept. */
  onLine(botId: string, line: AlertLine): void {
    if (line.stream === 'agent') return;
    this.lastLineMs.set(botId, Math.max(this.lastLineMs.get(botId) ?? 0, line.at));
    for (const { rule, matches } of this.lineRules) {
      if ((rule.botId !== undefined && rule.botId !== botId) || (rule.stream !== undefined && rule.stream !== line.stream)) continue;
      const key = `${rule.id}\0${botId}`;
      if ((this.quietUntil.get(key) ?? 0) > Date.now() || !matches(line.text)) continue;
      const gathered = this.gathered.get(key) ?? { rule, botId, lines: [] };
      if (gathered.lines.length < MATCHED_LINES_MAX) gathered.lines.push(line.text);
      this.gathered.set(key, gathered);
      this.gatherTimer ??= setTimeout(() => void this.tellGathered(), LINE_GATHER_MS);
    }
  }

  private async tellGathered(): Promise<void> {
    this.gatherTimer = undefined;
    const told = [...this.gathered.values()];
    this.gathered.clear();
    for (const { rule, botId, lines } of told) {
      const what = [rule.q === undefined ? '' : `contains "${rule.q}"`, rule.regex === undefined ? '' : `matches /${rule.regex}/`].filter(Boolean).join(' and ');
      await this.claimAndFire(rule, botId, { message: `alert "${rule.name}": a line ${what || 'was written'}`, logs: lines.join('\n') });
    }
  }

  /** Usage and silence, for the bots each rule watches that run now. */
  async check(nowMs = Date.now()): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      const running = this.driver.runningHealth();
      const startedAt = new Map(running.map((bot) => [bot.botId, bot.startedAtMs]));
      const watched = (rule: StoredAlert): string[] => (rule.botId === undefined ? [...startedAt.keys()] : startedAt.has(rule.botId) ? [rule.botId] : []);
      const usageRules = this.rules.filter((rule) => rule.kind === 'cpu' || rule.kind === 'memory');
      const stats = await this.statsOf([...new Set(usageRules.flatMap(watched))]);
      for (const rule of usageRules) {
        for (const botId of watched(rule)) {
          const key = `${rule.id}\0${botId}`;
          const read = stats.get(botId);
          const percent = read === undefined ? undefined : rule.kind === 'cpu' ? read.cpuPercent : read.memoryPercent;
          if (percent === undefined || percent <= (rule.abovePercent ?? 0)) {
            this.aboveSince.delete(key);
            continue;
          }
          const since = this.aboveSince.get(key) ?? nowMs;
          this.aboveSince.set(key, since);
          const windowMs = (rule.windowS ?? 0) * 1_000;
          if (nowMs - since < windowMs) continue;
          const measure = rule.kind === 'cpu' ? 'CPU' : 'memory';
          await this.claimAndFire(rule, botId, {
            message: `alert "${rule.name}": ${measure} at ${percent.toFixed(1)}% for ${Math.round((nowMs - since) / 1_000)} s (above ${rule.abovePercent}%)`,
            percent: Math.round(percent * 10) / 10,
          });
        }
      }
      for (const rule of this.rules.filter((one) => one.kind === 'silence')) {
        for (const botId of watched(rule)) {
          const last = Math.max(this.lastLineMs.get(botId) ?? 0, startedAt.get(botId) ?? 0, rule.createdMs, this.startedMs);
          const silentMs = nowMs - last;
          if (silentMs < (rule.silentS ?? Infinity) * 1_000) continue;
          await this.claimAndFire(rule, botId, { message: `alert "${rule.name}": no line for ${Math.round(silentMs / 1_000)} s` });
        }
      }
    } catch (err) {
      this.report('the alert rules could not be looked at', err);
    } finally {
      this.checking = false;
    }
  }

  private async statsOf(botIds: readonly string[]): Promise<ReadonlyMap<string, BotStats>> {
    if (botIds.length === 0) return new Map();
    const round = await this.driver.statsRound?.().catch(() => undefined);
    if (round !== undefined) return round;
    const read = await mapLimited(botIds, STATS_AT_ONCE, async (botId) => [botId, await this.driver.stats(botId).catch(() => undefined)] as const);
    return new Map(read.filter((entry): entry is readonly [string, BotStats] => entry[1] !== undefined));
  }

  private async claimAndFire(rule: StoredAlert, botId: string, fields: Record<string, unknown>): Promise<void> {
    const key = `${rule.id}\0${botId}`;
    const nowMs = Date.now();
    if ((this.quietUntil.get(key) ?? 0) > nowMs) return;
    const cooldownMs = rule.cooldownS * 1_000;
    try {
      if (!(await this.store.claim(rule.id, botId, nowMs, cooldownMs))) {
        this.quietUntil.set(key, nowMs + Math.min(cooldownMs, LOST_CLAIM_PAUSE_MS));
        return;
      }
      this.quietUntil.set(key, nowMs + cooldownMs);
      await this.fire(botId, { alert_id: rule.id, name: rule.name, kind: rule.kind, ...fields });
    } catch (err) {
      this.report(`alert ${rule.id} of bot ${botId} could not be told`, err);
    }
  }

  close(): void {
    for (const timer of this.timers) clearInterval(timer);
    clearTimeout(this.gatherTimer);
  }
}
