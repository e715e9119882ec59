import type { FaultReporter } from '../runtime/driver.js';
import { ActionSlots } from './action-slots.js';
import { runChain } from './chain.js';
import type { ScheduleActions } from './chain.js';
import { cronOf, duesBetween, nextDues } from './schedule-spec.js';
import type { ActionOutcome, ScheduleStore, StoredRun, StoredSchedule } from './schedule-store.js';

/** How often the clock looks for due times: a run starts at most this late after its due time, plus the claim. */
const TICK_MS = 250;
/** How often every enabled schedule is read again: a change another agent made is seen within this. */
const RELOAD_MS = 5_000;
/** How long a run's claim holds without its agent renewing it: past it, any agent marks the run cut. */
export const LEASE_MS = 15_000;
/** How many due schedules one transaction claims at most: a minute of a fleet's schedules is a few commits, not thousands. */
const CLAIMS_AT_ONCE = 250;
/**
 * In how many transactions at least a tick's due schedules are claimed, each agent in an order of its own: agents
 * sharing a store each win a share of a minute's chains, where one transaction of them all would give one agent every chain.
 */
const CLAIM_ROUNDS = 8;
/** How often runs whose agent died are looked for. */
const SWEEP_MS = 5_000;
/** How many restarts, stops, starts and commands of its schedules an agent runs at once (docs/api.md §18). */
export const ACTIONS_AT_ONCE = 8;

/** The schedule events (docs/api.md §9, §18), kept as any other. */
export type ScheduleEventType = 'schedule-started' | 'schedule-succeeded' | 'schedule-failed' | 'schedule-skipped';
export type NoteEvent = (botId: string, type: ScheduleEventType, fields: Record<string, unknown>) => Promise<void>;

export interface SchedulerOptions {
  /** This agent's life, as a run's holder: unique to the process, so a new life never takes an old one's runs for its own. */
  readonly agent: string;
  readonly tickMs?: number;
  readonly reloadMs?: number;
  readonly leaseMs?: number;
  readonly now?: () => number;
}

interface Watched {
  readonly schedule: StoredSchedule;
  /** The first due time after the handled ones. */
  nextDueMs: number | undefined;
}

/** What a due schedule's claim will write, worked out before the store is asked. */
interface Plan {
  readonly watched: Watched;
  readonly through: number;
  /** The first due time after `through`. */
  readonly next: number | undefined;
  readonly toRun: number | undefined;
  readonly note: string;
  readonly skipped: readonly StoredRun[];
}

/** A run refused because one of the schedule's is under way. */
export class RunGoing extends Error {}

const iso = (ms: number): string => new Date(ms).toISOString();

/**
 * The clock of every enabled schedule (docs/api.md §18): at each due time, one agent of those sharing the
 * store claims it and runs its chain, or records it skipped. A run holds a lease it renews while it goes;
 * one whose lease lapsed (its agent died mid-chain) is marked cut by whichever agent finds it, never run again.
 */
export class Scheduler {
  private watched = new Map<string, Watched>();
  private loadedAt = -Infinity;
  private sweptAt = -Infinity;
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> = Promise.resolve();
  private readonly chains = new Map<string, { readonly abort: AbortController; readonly done: Promise<void> }>();
  private closed = false;
  private readonly now: () => number;
  private readonly leaseMs: number;
  private readonly slots: ActionSlots;

  constructor(
    private readonly store: ScheduleStore,
    private readonly actions: ScheduleActions,
    private readonly note: NoteEvent,
    /** Whether this agent runs the bot's schedules: its runtime holds the bot, and the fleet places it here. */
    private readonly holds: (botId: string) => boolean,
    private readonly report: FaultReporter,
    private readonly options: SchedulerOptions,
  ) {
    this.now = options.now ?? Date.now;
    this.leaseMs = options.leaseMs ?? LEASE_MS;
    this.slots = new ActionSlots(ACTIONS_AT_ONCE);
  }

  start(): void {
    this.timer = setInterval(() => {
      this.ticking = this.ticking.then(() => this.tick()).catch((err: unknown) => this.report('the schedules could not be looked at', err));
    }, this.options.tickMs ?? TICK_MS);
    this.timer.unref();
  }

  /** A schedule was changed through this agent: read them all again at the next tick. */
  changed(): void {
    this.loadedAt = -Infinity;
  }

  /** The next `count` due times of the schedule, none while it is off. */
  nextDueTimes(schedule: StoredSchedule, count: number): number[] {
    if (!schedule.spec.enabled) return [];
    return nextDues(cronOf(schedule.spec.cron, schedule.spec.time_zone), Math.max(schedule.handledThroughMs, this.now()), count);
  }

  /** The bot's next due time of all its schedules this agent watches, with the first action it runs. */
  nextOfBot(botId: string): { atMs: number; action: string } | undefined {
    let next: { atMs: number; action: string } | undefined;
    for (const { schedule, nextDueMs } of this.watched.values()) {
      if (schedule.botId !== botId || nextDueMs === undefined) continue;
      if (!next || nextDueMs < next.atMs) next = { atMs: nextDueMs, action: schedule.spec.actions[0]?.type ?? '' };
    }
    return next;
  }

  /** Runs the schedule's chain now, outside its times (docs/api.md §18); throws RunGoing while one of its runs goes. */
  async runNow(schedule: StoredSchedule): Promise<StoredRun> {
    const now = this.now();
    // Its own key: a whole minute is a due time's, so a run asked for at one is a millisecond after.
    const dueMs = now % 60_000 === 0 ? now + 1 : now;
    const run = this.runningRun(schedule, dueMs, now, 'run now');
    if (!(await this.store.addRun(run, now))) throw new RunGoing();
    this.launch(schedule, run);
    return run;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await this.ticking;
    for (const { abort } of this.chains.values()) abort.abort();
    // What was under way is cut now, not a lease later: this life will not finish it.
    const cut = await this.store.cutHeld(this.options.agent, this.now(), 'the agent stopped before the chain ended').catch((err: unknown) => {
      this.report('the runs under way could not be marked cut', err);
      return [];
    });
    await Promise.allSettled(cut.map((run) => this.noteCut(run)));
  }

  private async tick(): Promise<void> {
    if (this.closed) return;
    const now = this.now();
    if (now - this.loadedAt >= (this.options.reloadMs ?? RELOAD_MS)) await this.load(now);
    if (now - this.sweptAt >= SWEEP_MS) {
      this.sweptAt = now;
      const cut = await this.store.cutLapsed(now, 'its agent stopped answering in the middle of the chain; it was not run again');
      await Promise.allSettled(cut.map((run) => this.noteCut(run)));
    }
    const due = shuffled([...this.watched.values()].filter((watched) => watched.nextDueMs !== undefined && watched.nextDueMs <= now && this.holds(watched.schedule.botId)));
    const atOnce = Math.min(CLAIMS_AT_ONCE, Math.ceil(due.length / CLAIM_ROUNDS));
    for (let from = 0; from < due.length; from += atOnce) {
      if (this.closed) return;
      const some = due.slice(from, from + atOnce);
      await this.claimDue(some, now).catch((err: unknown) => {
        this.loadedAt = -Infinity;
        this.report(`${some.length} schedule(s) due, of bots ${[...new Set(some.map(({ schedule }) => schedule.botId))].slice(0, 5).join(', ')}, could not be claimed`, err);
      });
    }
  }

  /** Every enabled schedule again: only those changed or claimed since they were read are read whole. */
  private async load(now: number): Promise<void> {
    const watched = new Map<string, Watched>();
    const changed: string[] = [];
    for (const head of await this.store.enabledHeads()) {
      const kept = this.watched.get(head.id);
      if (kept && kept.schedule.version === head.version && kept.schedule.handledThroughMs === head.handledThroughMs) watched.set(head.id, kept);
      else changed.push(head.id);
    }
    const fresh = await this.store.enabledOf(changed);
    for (const schedule of fresh) {
      try {
        watched.set(schedule.id, { schedule, nextDueMs: cronOf(schedule.spec.cron, schedule.spec.time_zone).nextRun(new Date(schedule.handledThroughMs))?.getTime() });
      } catch (err) {
        this.report(`schedule ${schedule.id} of bot ${schedule.botId} cannot be read`, err);
      }
    }
    this.watched = watched;
    this.loadedAt = now;
  }

  /** What claiming the schedule's due times up to now makes: one runs (or is skipped), the older ones are missed. */
  private planOf(watched: Watched, now: number): Plan | undefined {
    const { schedule } = watched;
    const cron = cronOf(schedule.spec.cron, schedule.spec.time_zone);
    const { spec } = schedule;
    const { dues, earlier, next } = duesBetween(cron, schedule.handledThroughMs, now, watched.nextDueMs);
    const through = dues.at(-1);
    if (through === undefined) return undefined;
    const deadlineMs = spec.starting_deadline_s * 1000;
    const onTime = dues.filter((due) => now - due <= deadlineMs);
    const missed = dues.filter((due) => now - due > deadlineMs);
    let toRun = onTime.at(-1);
    let note = '';
    const skipped: StoredRun[] = [];
    if (toRun === undefined && spec.missed === 'run-once') {
      toRun = missed.pop();
      note = 'missed while no agent ran it: run once on return';
    }
    if (missed.length > 0 || earlier) {
      const first = missed[0] ?? toRun ?? through;
      const last = missed.at(-1) ?? first;
      const count = `${missed.length}${earlier ? ' or more' : ''}`;
      skipped.push(this.skippedRun(schedule, last, now, `missed: ${count} due time(s) from ${iso(first)} to ${iso(last)} passed their starting deadline of ${spec.starting_deadline_s} s with no agent to run them`));
    }
    for (const due of onTime.slice(0, -1)) skipped.push(this.skippedRun(schedule, due, now, `a later due time (${iso(toRun ?? due)}) came before it started`));
    return { watched, through, next, toRun, note, skipped };
  }

  /** Claims the due times of `due` in one transaction, then tells what was skipped and runs what was claimed. */
  private async claimDue(due: readonly Watched[], now: number): Promise<void> {
    const plans: Plan[] = [];
    for (const watched of due) {
      try {
        const plan = this.planOf(watched, now);
        if (plan) plans.push(plan);
      } catch (err) {
        watched.nextDueMs = undefined;
        this.report(`schedule ${watched.schedule.id} of bot ${watched.schedule.botId} cannot be read`, err);
      }
    }
    const going = await this.store.goingOf(
      plans.filter((plan) => plan.toRun !== undefined).map((plan) => plan.watched.schedule.id),
      now,
    );
    const decided: { readonly plan: Plan; readonly skipped: StoredRun[]; runsDue: number | undefined }[] = [];
    for (const plan of plans) {
      const { schedule } = plan.watched;
      const one = { plan, skipped: [...plan.skipped], runsDue: undefined as number | undefined };
      if (plan.toRun !== undefined) {
        const goingRun = going.get(schedule.id);
        if (goingRun) one.skipped.push(this.skippedRun(schedule, plan.toRun, now, `the run due at ${iso(goingRun.dueMs)} was still going`));
        else if (schedule.spec.only_when_running && !(await this.actions.running(schedule.botId))) one.skipped.push(this.skippedRun(schedule, plan.toRun, now, 'the bot was not running, and the schedule runs only while it runs'));
        else one.runsDue = plan.toRun;
      }
      decided.push(one);
    }
    // Each lease from the claim's own time, not the tick's: the running checks above may have taken a while.
    const claimedAt = this.now();
    const claims = decided.map(({ plan, skipped, runsDue }) => {
      const run = runsDue === undefined ? undefined : this.runningRun(plan.watched.schedule, runsDue, claimedAt, plan.note);
      return { from: plan.watched.schedule, throughMs: plan.through, runs: run ? [...skipped, run] : skipped, plan, run, skipped };
    });
    const won = await this.store.claimAll(claims);
    for (const { from: schedule, plan, run } of claims) {
      if (!won.has(schedule.id)) {
        // Another agent claimed it first, or the schedule changed: read it again.
        this.loadedAt = -Infinity;
        plan.watched.nextDueMs = undefined;
        continue;
      }
      const claimed = { ...schedule, handledThroughMs: plan.through };
      this.watched.set(schedule.id, { schedule: claimed, nextDueMs: plan.next });
      if (run) this.launch(claimed, run);
    }
    for (const { from: schedule, skipped } of claims) {
      if (!won.has(schedule.id)) continue;
      for (const one of skipped) {
        await this.note(schedule.botId, 'schedule-skipped', { ...this.named(schedule, one.dueMs), reason: one.reason }).catch((err: unknown) => this.report('a skipped run could not be told', err));
      }
    }
  }

  private named(schedule: StoredSchedule, dueMs: number): Record<string, unknown> {
    return { schedule_id: schedule.id, name: schedule.spec.name, due_at: iso(dueMs) };
  }

  private skippedRun(schedule: StoredSchedule, dueMs: number, now: number, reason: string): StoredRun {
    const actions = schedule.spec.actions.map((action): ActionOutcome => ({ type: action.type, outcome: 'not-run', started_at: null, ended_at: null, message: null }));
    return { scheduleId: schedule.id, dueMs, botId: schedule.botId, state: 'skipped', agent: this.options.agent, leaseUntilMs: null, startedMs: null, endedMs: now, actions, reason };
  }

  /** A run as its claim writes it: a first action with no offset is under way from the claim on, so the chain need not write again before it. */
  private runningRun(schedule: StoredSchedule, dueMs: number, now: number, note: string): StoredRun {
    const actions = schedule.spec.actions.map(
      (action, index): ActionOutcome =>
        index === 0 && action.offset_s === 0
          ? { type: action.type, outcome: 'running', started_at: iso(now), ended_at: null, message: null }
          : { type: action.type, outcome: 'not-run', started_at: null, ended_at: null, message: null },
    );
    return { scheduleId: schedule.id, dueMs, botId: schedule.botId, state: 'running', agent: this.options.agent, leaseUntilMs: now + this.leaseMs, startedMs: now, endedMs: null, actions, reason: note === '' ? null : note };
  }

  /** Runs the claimed run's chain in the background, its lease renewed while it goes. */
  private launch(schedule: StoredSchedule, run: StoredRun): void {
    const key = `${run.scheduleId} ${run.dueMs}`;
    const abort = new AbortController();
    const done = (async () => {
      // Told in the history's order, but not waited for: a fleet's events are written one at a time, and a chain
      // whose first renewal waited behind a minute's worth of them would lose its lease before it began.
      const started = this.note(schedule.botId, 'schedule-started', { ...this.named(schedule, run.dueMs), ...(run.reason ? { note: run.reason } : {}) }).catch((err: unknown) =>
        this.report('a run start could not be told', err),
      );
      const ended = await runChain(schedule.spec, run, {
        actions: this.actions,
        signal: abort.signal,
        now: this.now,
        keep: (actions, end) => this.store.progress(run, this.options.agent, actions, this.now() + this.leaseMs, end),
        renewEveryMs: Math.max(100, Math.floor(this.leaseMs / 3)),
        report: this.report,
        slots: this.slots,
      });
      await started;
      if (!ended) return;
      const type = ended.state === 'succeeded' ? 'schedule-succeeded' : 'schedule-failed';
      await this.note(schedule.botId, type, { ...this.named(schedule, run.dueMs), ...(ended.reason ? { reason: ended.reason } : {}), actions: ended.actions.map(({ type: action, outcome }) => ({ type: action, outcome })) });
    })()
      .catch((err: unknown) => this.report(`the run of schedule ${schedule.id} due at ${iso(run.dueMs)} failed`, err))
      .finally(() => this.chains.delete(key));
    this.chains.set(key, { abort, done });
  }

  private async noteCut(run: StoredRun): Promise<void> {
    await this.note(run.botId, 'schedule-failed', { schedule_id: run.scheduleId, due_at: iso(run.dueMs), reason: run.reason, cut: true }).catch((err: unknown) => this.report('a cut run could not be told', err));
  }
}

/** `items` in a random order (Fisher-Yates), in place. */
function shuffled<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i -= 1) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}
