import type { SqlPort } from '../history/sql-port.js';
import type { ScheduleSpec } from './schedule-spec.js';
import { SCHEDULES_PER_BOT } from './schedule-spec.js';

/** A schedule as kept: its spec, and how far its due times are handled. */
export interface StoredSchedule {
  readonly id: string;
  readonly botId: string;
  readonly spec: ScheduleSpec;
  /** One more at each change: a claim made from an older one changes nothing. */
  readonly version: number;
  /** Every due time up to this one is claimed (run or skipped) by some agent; none after it. */
  readonly handledThroughMs: number;
  readonly createdMs: number;
  readonly updatedMs: number;
}

export type RunState = 'running' | 'succeeded' | 'failed' | 'skipped' | 'cut';

/** What one action of a run did (docs/api.md §18). */
export interface ActionOutcome {
  readonly type: string;
  readonly outcome: 'running' | 'succeeded' | 'failed' | 'not-run';
  readonly started_at: string | null;
  readonly ended_at: string | null;
  readonly message: string | null;
  /** `command`: how it ended, and what it wrote (bounded). */
  readonly exit_code?: number | null;
  readonly timed_out?: boolean;
  readonly output?: string;
  readonly output_truncated?: boolean;
}

/** One run of a schedule, keyed by its schedule and due time: claimed once, by one agent. */
export interface StoredRun {
  readonly scheduleId: string;
  readonly dueMs: number;
  readonly botId: string;
  readonly state: RunState;
  readonly agent: string | null;
  readonly leaseUntilMs: number | null;
  readonly startedMs: number | null;
  readonly endedMs: number | null;
  readonly actions: readonly ActionOutcome[];
  readonly reason: string | null;
}

/** The runs kept per schedule, newest first. */
export const RUNS_KEPT = 100;

const SCHEDULE_COLUMNS = 'id, bot_id, spec, version, handled_through_ms, created_ms, updated_ms';
const RUN_COLUMNS = 'schedule_id, due_ms, bot_id, state, agent, lease_until_ms, started_ms, ended_ms, actions, reason';

const numberOrNull = (value: unknown): number | null => (value === null || value === undefined ? null : Number(value));

/** Seals what a schedule keeps of a deploy (its variables' values, a registry's password), bound to the bot (src/secrets/chat-seal.ts). */
export interface SecretSeal {
  seal(botId: string, json: string): string;
  open(botId: string, kept: string): string;
}

/** A spec as its row keeps it: each `deploy` body sealed. */
function specText(botId: string, spec: ScheduleSpec, seal: SecretSeal | undefined): string {
  if (!seal) return JSON.stringify(spec);
  return JSON.stringify({ ...spec, actions: spec.actions.map((action) => (action.deploy ? { ...action, deploy: { sealed: seal.seal(botId, JSON.stringify(action.deploy)) } } : action)) });
}

function specFrom(botId: string, text: string, seal: SecretSeal | undefined): ScheduleSpec {
  const spec = JSON.parse(text) as ScheduleSpec;
  return {
    ...spec,
    actions: spec.actions.map((action) => {
      const sealed = (action.deploy as { sealed?: unknown } | undefined)?.sealed;
      return typeof sealed === 'string' && seal ? { ...action, deploy: JSON.parse(seal.open(botId, sealed)) as Record<string, unknown> } : action;
    }),
  };
}

function scheduleOf(row: Record<string, unknown>, seal: SecretSeal | undefined): StoredSchedule {
  return {
    id: row.id as string,
    botId: row.bot_id as string,
    spec: specFrom(row.bot_id as string, row.spec as string, seal),
    version: Number(row.version),
    handledThroughMs: Number(row.handled_through_ms),
    createdMs: Number(row.created_ms),
    updatedMs: Number(row.updated_ms),
  };
}

function runOf(row: Record<string, unknown>): StoredRun {
  return {
    scheduleId: row.schedule_id as string,
    dueMs: Number(row.due_ms),
    botId: row.bot_id as string,
    state: row.state as RunState,
    agent: (row.agent as string | null) ?? null,
    leaseUntilMs: numberOrNull(row.lease_until_ms),
    startedMs: numberOrNull(row.started_ms),
    endedMs: numberOrNull(row.ended_ms),
    actions: JSON.parse(row.actions as string) as ActionOutcome[],
    reason: (row.reason as string | null) ?? null,
  };
}

const runValues = (run: StoredRun): unknown[] => [run.scheduleId, run.dueMs, run.botId, run.state, run.agent, run.leaseUntilMs, run.startedMs, run.endedMs, JSON.stringify(run.actions), run.reason];

/** One schedule's due times claimed through `throughMs`, from `from` as read, with the runs they make. */
export interface Claim {
  readonly from: StoredSchedule;
  readonly throughMs: number;
  readonly runs: readonly StoredRun[];
}

/** A bot already has as many schedules as it may. */
export class TooManySchedules extends Error {}

/**
 * Schedules and their runs (docs/api.md §18), in the agent's own database: SQLite for one agent, PostgreSQL for
 * several. A due time is claimed by moving the schedule's `handled_through_ms` from the value read to the due
 * time, in the transaction that writes its run: of agents that read the same value, one moves it, and the
 * others change nothing. That, and the run's key (schedule, due time), make every due time claimed once.
 */
export class ScheduleStore {
  constructor(
    private readonly sql: SqlPort,
    private readonly seal?: SecretSeal,
  ) {}

  private readonly schedule = (row: Record<string, unknown>): StoredSchedule => scheduleOf(row, this.seal);

  async ofBot(botId: string): Promise<StoredSchedule[]> {
    return (await this.sql.query(`SELECT ${SCHEDULE_COLUMNS} FROM schedules WHERE bot_id = $1 ORDER BY created_ms, id`, [botId])).map(this.schedule);
  }

  async get(botId: string, id: string): Promise<StoredSchedule | undefined> {
    const [row] = await this.sql.query(`SELECT ${SCHEDULE_COLUMNS} FROM schedules WHERE bot_id = $1 AND id = $2`, [botId, id]);
    return row && this.schedule(row);
  }

  /** What tells whether an enabled schedule changed, or was claimed, since it was read: no spec read or opened. */
  async enabledHeads(): Promise<Pick<StoredSchedule, 'id' | 'version' | 'handledThroughMs'>[]> {
    return (await this.sql.query('SELECT id, version, handled_through_ms FROM schedules WHERE enabled = 1')).map((row) => ({
      id: row.id as string,
      version: Number(row.version),
      handledThroughMs: Number(row.handled_through_ms),
    }));
  }

  /** The enabled ones of the schedules `ids`, read a few hundred at a time. */
  async enabledOf(ids: readonly string[]): Promise<StoredSchedule[]> {
    const read: StoredSchedule[] = [];
    for (let from = 0; from < ids.length; from += 500) {
      const some = ids.slice(from, from + 500);
      const rows = await this.sql.query(`SELECT ${SCHEDULE_COLUMNS} FROM schedules WHERE enabled = 1 AND id IN (${some.map((_, n) => `$${n + 1}`).join(', ')})`, some);
      read.push(...rows.map(this.schedule));
    }
    return read;
  }

  /** Keeps a new schedule, its due times from `nowMs` on; throws TooManySchedules past SCHEDULES_PER_BOT. */
  async create(id: string, botId: string, spec: ScheduleSpec, nowMs: number): Promise<StoredSchedule> {
    return this.sql.transaction(async (query) => {
      const [count] = await query('SELECT COUNT(*) AS n FROM schedules WHERE bot_id = $1', [botId]);
      if (Number(count?.n ?? 0) >= SCHEDULES_PER_BOT) throw new TooManySchedules();
      const [row] = await query(
        `INSERT INTO schedules (id, bot_id, spec, enabled, version, handled_through_ms, created_ms, updated_ms) VALUES ($1, $2, $3, $4, 1, $5, $5, $5) RETURNING ${SCHEDULE_COLUMNS}`,
        [id, botId, specText(botId, spec, this.seal), spec.enabled ? 1 : 0, nowMs],
      );
      return this.schedule(row!);
    });
  }

  /**
   * Keeps a schedule's new spec; a schedule turned on, or given another expression or zone, has its due
   * times from `nowMs` on (what fell due while it was off is not missed). Undefined when there is none.
   */
  async update(botId: string, id: string, spec: ScheduleSpec, nowMs: number): Promise<StoredSchedule | undefined> {
    return this.sql.transaction(async (query) => {
      const [row] = await query(`SELECT ${SCHEDULE_COLUMNS} FROM schedules WHERE bot_id = $1 AND id = $2`, [botId, id]);
      if (!row) return undefined;
      const before = this.schedule(row);
      const fresh = (spec.enabled && !before.spec.enabled) || spec.cron !== before.spec.cron || spec.time_zone !== before.spec.time_zone;
      const [updated] = await query(
        `UPDATE schedules SET spec = $3, enabled = $4, version = version + 1, handled_through_ms = $5, updated_ms = $6 WHERE bot_id = $1 AND id = $2 RETURNING ${SCHEDULE_COLUMNS}`,
        [botId, id, specText(botId, spec, this.seal), spec.enabled ? 1 : 0, fresh ? Math.max(nowMs, before.handledThroughMs) : before.handledThroughMs, nowMs],
      );
      return this.schedule(updated!);
    });
  }

  /** Drops a schedule and its runs; false when there was none. */
  async remove(botId: string, id: string): Promise<boolean> {
    return this.sql.transaction(async (query) => {
      const gone = await query('DELETE FROM schedules WHERE bot_id = $1 AND id = $2 RETURNING id', [botId, id]);
      await query('DELETE FROM schedule_runs WHERE schedule_id = $1', [id]);
      return gone.length > 0;
    });
  }

  /** Drops every schedule of a bot removed, with their runs. */
  async forgetBot(botId: string): Promise<void> {
    await this.sql.transaction(async (query) => {
      await query('DELETE FROM schedule_runs WHERE bot_id = $1', [botId]);
      await query('DELETE FROM schedules WHERE bot_id = $1', [botId]);
    });
  }

  /**
   * Claims the schedule's due times up to `throughMs`, from `from` as read: writes `runs` (one `running` at
   * most, the others skipped) and moves `handled_through_ms`. False when another agent claimed first, or the
   * schedule changed since it was read: then nothing is written.
   */
  async claim(from: StoredSchedule, throughMs: number, runs: readonly StoredRun[]): Promise<boolean> {
    return (await this.claimAll([{ from, throughMs, runs }])).has(from.id);
  }

  /**
   * Each claim as `claim` makes it, all in one transaction (one commit for a minute's worth of schedules);
   * answers the ids of the schedules claimed. Taken in the order of their ids, so two agents claiming
   * overlapping sets lock the rows in one order and never wait on each other in a circle.
   */
  async claimAll(claims: readonly Claim[]): Promise<Set<string>> {
    const ordered = [...claims].sort((a, b) => (a.from.id < b.from.id ? -1 : a.from.id > b.from.id ? 1 : 0));
    return this.sql.transaction(async (query) => {
      const won = new Set<string>();
      for (const { from, throughMs, runs } of ordered) {
        const moved = await query('UPDATE schedules SET handled_through_ms = $3 WHERE id = $1 AND version = $2 AND handled_through_ms = $4 AND enabled = 1 RETURNING id', [
          from.id,
          from.version,
          throughMs,
          from.handledThroughMs,
        ]);
        if (moved.length === 0) continue;
        for (const run of runs) {
          await query(`INSERT INTO schedule_runs (${RUN_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (schedule_id, due_ms) DO NOTHING`, runValues(run));
        }
        await query(
          `DELETE FROM schedule_runs WHERE schedule_id = $1 AND state != 'running' AND due_ms < (SELECT due_ms FROM schedule_runs WHERE schedule_id = $1 ORDER BY due_ms DESC LIMIT 1 OFFSET ${RUNS_KEPT - 1})`,
          [from.id],
        );
        won.add(from.id);
      }
      return won;
    });
  }

  /** Writes a run asked for outside the schedule's times, unless one of its runs goes at `nowMs`; false then. */
  async addRun(run: StoredRun, nowMs: number): Promise<boolean> {
    return this.sql.transaction(async (query) => {
      const [going] = await query("SELECT 1 AS going FROM schedule_runs WHERE schedule_id = $1 AND state = 'running' AND lease_until_ms >= $2 LIMIT 1", [run.scheduleId, nowMs]);
      if (going) return false;
      const added = await query(`INSERT INTO schedule_runs (${RUN_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (schedule_id, due_ms) DO NOTHING RETURNING due_ms`, runValues(run));
      return added.length > 0;
    });
  }

  /** The schedule's run still going at `nowMs` (its holder's lease not lapsed); undefined when none is. */
  async going(scheduleId: string, nowMs: number): Promise<StoredRun | undefined> {
    return (await this.goingOf([scheduleId], nowMs)).get(scheduleId);
  }

  /** The runs still going at `nowMs` of the schedules `ids`, by schedule, read a few hundred at a time. */
  async goingOf(ids: readonly string[], nowMs: number): Promise<Map<string, StoredRun>> {
    const going = new Map<string, StoredRun>();
    for (let from = 0; from < ids.length; from += 500) {
      const some = ids.slice(from, from + 500);
      const rows = await this.sql.query(
        `SELECT ${RUN_COLUMNS} FROM schedule_runs WHERE state = 'running' AND lease_until_ms >= $1 AND schedule_id IN (${some.map((_, n) => `$${n + 2}`).join(', ')})`,
        [nowMs, ...some],
      );
      for (const run of rows.map(runOf)) going.set(run.scheduleId, run);
    }
    return going;
  }

  /**
   * The run's progress (its actions so far) and its holder's lease, renewed to `leaseUntilMs`; `state` ends it.
   * False when the run is no longer `agent`'s and going (another agent marked it cut): the chain stops.
   */
  async progress(run: Pick<StoredRun, 'scheduleId' | 'dueMs'>, agent: string, actions: readonly ActionOutcome[], leaseUntilMs: number, end?: { state: RunState; reason: string | null; atMs: number }): Promise<boolean> {
    const rows = await this.sql.query(
      `UPDATE schedule_runs SET actions = $4, lease_until_ms = $5, state = $6, reason = COALESCE($7, reason), ended_ms = $8
       WHERE schedule_id = $1 AND due_ms = $2 AND agent = $3 AND state = 'running' RETURNING due_ms`,
      [run.scheduleId, run.dueMs, agent, JSON.stringify(actions), leaseUntilMs, end?.state ?? 'running', end?.reason ?? null, end?.atMs ?? null],
    );
    return rows.length > 0;
  }

  /** Marks `cut` every run whose holder's lease lapsed before `nowMs` (an agent that died mid-chain); answers them. */
  async cutLapsed(nowMs: number, reason: string): Promise<StoredRun[]> {
    return (
      await this.sql.query(`UPDATE schedule_runs SET state = 'cut', ended_ms = $1, reason = $2 WHERE state = 'running' AND lease_until_ms < $1 RETURNING ${RUN_COLUMNS}`, [nowMs, reason])
    ).map(runOf);
  }

  /** Marks `cut` the runs `agent` holds (it is stopping); answers them. */
  async cutHeld(agent: string, nowMs: number, reason: string): Promise<StoredRun[]> {
    return (await this.sql.query(`UPDATE schedule_runs SET state = 'cut', ended_ms = $1, reason = $2 WHERE state = 'running' AND agent = $3 RETURNING ${RUN_COLUMNS}`, [nowMs, reason, agent])).map(
      runOf,
    );
  }

  /** The schedule's newest `limit` runs before `beforeMs` (all when undefined), newest first. */
  async runs(scheduleId: string, limit: number, beforeMs?: number): Promise<StoredRun[]> {
    return (
      await this.sql.query(`SELECT ${RUN_COLUMNS} FROM schedule_runs WHERE schedule_id = $1 AND due_ms < $2 ORDER BY due_ms DESC LIMIT $3`, [scheduleId, beforeMs ?? Number.MAX_SAFE_INTEGER, limit])
    ).map(runOf);
  }
}
