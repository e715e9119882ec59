import type { RetentionPolicy } from '../backups/retention.js';
import { Cron } from 'croner';
import { LRUCache } from 'lru-cache';

/** The most schedules one bot has (docs/api.md §18). */
export const SCHEDULES_PER_BOT = 20;
/** The most actions one schedule's chain has. */
export const ACTIONS_PER_SCHEDULE = 10;
/** The longest an action waits before it runs, in seconds. */
export const OFFSET_MAX_S = 900;
/** A command's time-out: its default and its most, in seconds. */
export const COMMAND_TIMEOUT_DEFAULT_S = 30;
export const COMMAND_TIMEOUT_MAX_S = 600;
/** The most a command's output takes, measured as answered in JSON: past it, it is cut and says so. */
export const COMMAND_OUTPUT_BYTES = 64 * 1024;
/** A starting deadline: its default and its most, in seconds. */
export const STARTING_DEADLINE_DEFAULT_S = 60;
export const STARTING_DEADLINE_MAX_S = 86_400;

export type ActionType = 'restart' | 'stop' | 'start' | 'deploy' | 'backup' | 'verify' | 'command';
export const ACTION_TYPES: readonly ActionType[] = ['restart', 'stop', 'start', 'deploy', 'backup', 'verify', 'command'];

/** One step of a schedule's chain (docs/api.md §18). */
export interface ScheduleAction {
  readonly type: ActionType;
  /** Seconds it waits after the step before it (or the run's start). */
  readonly offset_s: number;
  /** Whether the chain goes on when this step fails. */
  readonly continue_on_failure: boolean;
  /** `deploy`: the PATCH body it deploys (docs/api.md §15), as validated. */
  readonly deploy?: Readonly<Record<string, unknown>>;
  /** `command`: the argument list run in the bot's container, and its time-out. */
  readonly command?: readonly string[];
  readonly timeout_s?: number;
  /** `backup`: how it is made consistent (docs/api.md §20); `stop` when not given. */
  readonly mode?: 'stop' | 'live' | 'pre';
  /** `backup` in mode `pre`: the command run in the bot before its folders are copied, and its time-out. */
  readonly pre?: readonly string[];
  readonly pre_timeout_s?: number;
  /** `backup`: the retention applied to the bot's backups once it is made. */
  readonly keep?: RetentionPolicy;
  /** `backup`: the stores it is copied to (AGENT_BACKUP_STORES). */
  readonly stores?: readonly string[];
  /** `verify`: the store whose newest backup of the bot it verifies; the agent's folder when not given. */
  readonly store?: string;
}

/** What a schedule is, as the platform writes it and every answer says it. */
export interface ScheduleSpec {
  readonly name: string | null;
  readonly cron: string;
  readonly time_zone: string;
  readonly enabled: boolean;
  /** Runs only while the bot runs: else the run is `skipped`. */
  readonly only_when_running: boolean;
  /** Runs due while no agent was up: skipped, or run once on return. */
  readonly missed: 'skip' | 'run-once';
  /** How late after its due time a run may still start as due; later, it was missed. */
  readonly starting_deadline_s: number;
  readonly actions: readonly ScheduleAction[];
}

/** croner's reading of a five-field expression (or a nickname) in `zone`; throws on a bad one. */
export function cronOf(cron: string, zone: string): Cron {
  const key = `${zone} ${cron}`;
  let made = crons.get(key);
  if (!made) crons.set(key, (made = new Cron(cron, { timezone: zone, mode: '5-part', paused: true })));
  return made;
}

/**
 * The expressions read lately, by zone: a paused croner job answers due times and keeps no state, but takes
 * about 80 KB of heap (docs/performance.md), so none is held per schedule; a fleet's schedules share a few.
 */
const crons = new LRUCache<string, Cron>({ max: 100 });

/** The longest stretch one look reads due times of: at most 1,440 of them, as runs are at most once a minute. */
const DUES_READ_MS = 24 * 3_600_000;

/**
 * The due times after `afterMs` up to `untilMs`, oldest first, within the last day of that stretch; `earlier`:
 * some fell before that day (a schedule missed for longer); `next`: the first after `untilMs`. `firstDueMs`, the
 * first after `afterMs` when the caller knows it, spares a reading of the expression (about 20 µs each).
 */
export function duesBetween(cron: Cron, afterMs: number, untilMs: number, firstDueMs?: number): { dues: number[]; earlier: boolean; next: number | undefined } {
  const from = Math.max(afterMs, untilMs - DUES_READ_MS);
  const dues: number[] = [];
  let at = firstDueMs !== undefined && firstDueMs > from ? new Date(firstDueMs) : cron.nextRun(new Date(from));
  for (; at !== null && at.getTime() <= untilMs; at = cron.nextRun(at)) dues.push(at.getTime());
  const first = from > afterMs ? (firstDueMs ?? cron.nextRun(new Date(afterMs))?.getTime()) : undefined;
  return { dues, earlier: first !== undefined && first <= from, next: at?.getTime() };
}

/** The next `count` due times after `afterMs`. */
export function nextDues(cron: Cron, afterMs: number, count: number): number[] {
  return cron.nextRuns(count, new Date(afterMs)).map((due) => due.getTime());
}
