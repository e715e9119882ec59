import test from 'ava';
import { SqliteHistoryStore } from '../../src/history/sqlite-store.js';
import type { ScheduleActions } from '../../src/schedules/chain.js';
import { ACTIONS_AT_ONCE, Scheduler } from '../../src/schedules/scheduler.js';
import type { ScheduleEventType } from '../../src/schedules/scheduler.js';
import { cronOf, duesBetween, nextDues } from '../../src/schedules/schedule-spec.js';
import type { ScheduleSpec } from '../../src/schedules/schedule-spec.js';
import { ScheduleStore } from '../../src/schedules/schedule-store.js';
import { specOf, validSchedule, scheduleRequest } from '../../src/http/schedule-schemas.js';
import { eventually } from '../helpers/eventually.js';

// The clock in hand: each scheduler here reads a time the test sets, over a real store (SQLite in memory).

const BOT = 'bot_1_1_clock';
const iso = (ms: number) => new Date(ms).toISOString();

function spec(body: Record<string, unknown>): ScheduleSpec {
  return specOf(validSchedule(scheduleRequest, body));
}

interface Rig {
  store: ScheduleStore;
  scheduler: Scheduler;
  clock: { ms: number };
  done: string[];
  events: { type: ScheduleEventType; fields: Record<string, unknown> }[];
}

function rig(
  t: { teardown(fn: () => Promise<void>): void },
  startIso: string,
  actions: Partial<ScheduleActions> = {},
  shared?: SqliteHistoryStore,
  agent = 'agent-a',
  leaseMs = 15_000,
  noted: (type: ScheduleEventType) => Promise<void> = async () => undefined,
): Rig {
  // A store of its own closes with the scheduler; a shared one, registered by the test first, after every scheduler (teardowns run last first).
  const sqlite = shared ?? new SqliteHistoryStore(':memory:');
  if (!shared) t.teardown(() => sqlite.close());
  const store = new ScheduleStore(sqlite.sql());
  const clock = { ms: Date.parse(startIso) };
  const done: string[] = [];
  const events: Rig['events'] = [];
  const scheduler = new Scheduler(
    store,
    {
      running: async () => true,
      power: async (_botId, operation) => {
        done.push(`${operation}@${iso(clock.ms)}`);
        return 'ok';
      },
      deploy: async () => 'deployed',
      backup: async (_botId, mode) => {
        done.push(`backup ${mode}@${iso(clock.ms)}`);
        return 'backup made';
      },
      verify: async () => 'verified',
      command: async () => ({ exitCode: 0, output: 'hi\n', truncated: false, timedOut: false, message: null }),
      ...actions,
    },
    async (_botId, type, fields) => {
      events.push({ type, fields });
      await noted(type);
    },
    () => true,
    (what, err) => console.error(what, err),
    { agent, tickMs: 5, reloadMs: 0, leaseMs, now: () => clock.ms },
  );
  scheduler.start();
  t.teardown(() => scheduler.close());
  return { store, scheduler, clock, done, events };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 60));

test('a schedule every minute runs once at each due time, however often the clock looks', async (t) => {
  const { store, clock, done, events } = rig(t, '2026-03-01T10:00:30.000Z');
  await store.create('sch_0000000000000001', BOT, spec({ cron: '* * * * *', actions: [{ type: 'restart' }] }), clock.ms);
  await settle();
  t.deepEqual(done, [], 'nothing is due before the next whole minute');
  clock.ms = Date.parse('2026-03-01T10:01:00.200Z');
  await eventually(() => done.length === 1, 2_000);
  await settle();
  clock.ms = Date.parse('2026-03-01T10:01:30.000Z');
  await settle();
  clock.ms = Date.parse('2026-03-01T10:02:00.100Z');
  await eventually(() => done.length === 2, 2_000);
  await settle();
  t.deepEqual(done, ['restart@2026-03-01T10:01:00.200Z', 'restart@2026-03-01T10:02:00.100Z']);
  const runs = await store.runs('sch_0000000000000001', 10);
  t.deepEqual(runs.map((run) => [iso(run.dueMs), run.state]), [['2026-03-01T10:02:00.000Z', 'succeeded'], ['2026-03-01T10:01:00.000Z', 'succeeded']]);
  t.deepEqual(events.map((event) => event.type), ['schedule-started', 'schedule-succeeded', 'schedule-started', 'schedule-succeeded']);
});

test('two agents on one store claim each due time once between them', async (t) => {
  const sqlite = new SqliteHistoryStore(':memory:');
  t.teardown(() => sqlite.close());
  const one = rig(t, '2026-03-01T10:00:30.000Z', {}, sqlite, 'agent-a');
  const two = rig(t, '2026-03-01T10:00:30.000Z', {}, sqlite, 'agent-b');
  for (let n = 0; n < 20; n += 1) await one.store.create(`sch_00000000000000${String(n).padStart(2, '0')}`, BOT, spec({ cron: '* * * * *', actions: [{ type: 'start' }] }), one.clock.ms);
  for (const minute of [1, 2, 3]) {
    one.clock.ms = two.clock.ms = Date.parse(`2026-03-01T10:0${minute}:00.050Z`);
    await eventually(() => one.done.length + two.done.length === 20 * minute, 3_000);
  }
  await settle();
  t.is(one.done.length + two.done.length, 60);
});

test('a run still going when the next falls due makes that one skipped, recorded', async (t) => {
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (release = resolve));
  // A lease longer than the minute the clock jumps: the run's agent is alive, only slow.
  const { store, clock, events } = rig(t, '2026-03-01T10:00:30.000Z', {
    command: async () => {
      await held;
      return { exitCode: 0, output: '', truncated: false, timedOut: false, message: null };
    },
  }, undefined, 'agent-a', 300_000);
  await store.create('sch_0000000000000002', BOT, spec({ cron: '* * * * *', actions: [{ type: 'command', command: ['sleep', '90'] }] }), clock.ms);
  clock.ms = Date.parse('2026-03-01T10:01:00.000Z');
  await eventually(async () => (await store.runs('sch_0000000000000002', 5)).length === 1, 2_000);
  clock.ms = Date.parse('2026-03-01T10:02:00.000Z');
  await eventually(async () => (await store.runs('sch_0000000000000002', 5)).length === 2, 2_000);
  release();
  await eventually(async () => (await store.runs('sch_0000000000000002', 5)).some((run) => run.state === 'succeeded'), 2_000);
  const runs = await store.runs('sch_0000000000000002', 5);
  t.deepEqual(runs.map((run) => run.state), ['skipped', 'succeeded']);
  t.regex(runs[0]?.reason ?? '', /the run due at 2026-03-01T10:01:00.000Z was still going/);
  t.true(events.some((event) => event.type === 'schedule-skipped'));
});

test('runs missed while no agent was up are one skipped record, or one run on return', async (t) => {
  const sqlite = new SqliteHistoryStore(':memory:');
  t.teardown(() => sqlite.close());
  const store = new ScheduleStore(sqlite.sql());
  const made = Date.parse('2026-03-01T10:00:30.000Z');
  await store.create('sch_000000000000000a', BOT, spec({ cron: '*/5 * * * *', missed: 'skip', actions: [{ type: 'restart' }] }), made);
  await store.create('sch_000000000000000b', BOT, spec({ cron: '*/5 * * * *', missed: 'run-once', actions: [{ type: 'restart' }] }), made);
  // The agent comes back 2 h 3 min later: 24 due times passed, the last 3 min ago, past the 60 s deadline.
  const back = rig(t, '2026-03-01T12:03:30.000Z', {}, sqlite);
  await eventually(async () => (await store.runs('sch_000000000000000b', 5)).some((run) => run.state === 'succeeded'), 2_000);
  await settle();
  const skipped = await store.runs('sch_000000000000000a', 5);
  t.deepEqual(skipped.map((run) => [iso(run.dueMs), run.state]), [['2026-03-01T12:00:00.000Z', 'skipped']]);
  t.regex(skipped[0]?.reason ?? '', /missed: 24 due time\(s\) from 2026-03-01T10:05:00.000Z to 2026-03-01T12:00:00.000Z/);
  const once = await store.runs('sch_000000000000000b', 5);
  t.deepEqual(once.map((run) => [iso(run.dueMs), run.state]), [['2026-03-01T12:00:00.000Z', 'succeeded'], ['2026-03-01T11:55:00.000Z', 'skipped']]);
  t.is(back.done.length, 1, 'run once, not 24 times');
});

test('a run whose agent died mid-chain is marked cut by another, and never run again', async (t) => {
  const sqlite = new SqliteHistoryStore(':memory:');
  t.teardown(() => sqlite.close());
  const store = new ScheduleStore(sqlite.sql());
  await store.create('sch_000000000000000c', BOT, spec({ cron: '* * * * *', actions: [{ type: 'restart' }, { type: 'start' }] }), Date.parse('2026-03-01T10:00:30.000Z'));
  const [schedule] = await store.ofBot(BOT);
  // What a dead agent left: the run claimed, its first action under way, its lease renewed last at 10:01:05.
  const dead = { scheduleId: schedule!.id, dueMs: Date.parse('2026-03-01T10:01:00.000Z'), botId: BOT, state: 'running' as const, agent: 'dead', leaseUntilMs: Date.parse('2026-03-01T10:01:20.000Z'), startedMs: Date.parse('2026-03-01T10:01:00.000Z'), endedMs: null, reason: null, actions: [{ type: 'restart', outcome: 'running' as const, started_at: '2026-03-01T10:01:00.000Z', ended_at: null, message: null }, { type: 'start', outcome: 'not-run' as const, started_at: null, ended_at: null, message: null }] };
  t.true(await store.claim(schedule!, dead.dueMs, [dead]));
  const other = rig(t, '2026-03-01T10:01:30.000Z', {}, sqlite, 'agent-b');
  await eventually(async () => (await store.runs(schedule!.id, 1))[0]?.state === 'cut', 2_000);
  const [cut] = await store.runs(schedule!.id, 1);
  t.is(cut?.state, 'cut');
  t.deepEqual(cut?.actions.map((action) => action.outcome), ['running', 'not-run'], 'what it did is kept as its agent last wrote it');
  t.deepEqual(other.done, [], 'the cut run is not run again');
  t.true(other.events.some((event) => event.type === 'schedule-failed' && event.fields.cut === true));
});

test('a chain goes on past a failure only where the action says so, and keeps each outcome', async (t) => {
  const { store, clock, done } = rig(t, '2026-03-01T10:00:30.000Z', {
    command: async () => ({ exitCode: 3, output: 'bad\n', truncated: false, timedOut: false, message: null }),
  });
  await store.create('sch_000000000000000d', BOT, spec({ cron: '* * * * *', actions: [{ type: 'command', command: ['false'], continue_on_failure: true }, { type: 'restart' }, { type: 'command', command: ['false'] }, { type: 'stop' }] }), clock.ms);
  clock.ms = Date.parse('2026-03-01T10:01:00.000Z');
  await eventually(async () => (await store.runs('sch_000000000000000d', 1))[0]?.state === 'failed', 2_000);
  const [run] = await store.runs('sch_000000000000000d', 1);
  t.deepEqual(run?.actions.map((action) => action.outcome), ['failed', 'succeeded', 'failed', 'not-run']);
  t.is(run?.actions[0]?.exit_code, 3);
  t.is(run?.actions[0]?.output, 'bad\n');
  t.regex(run?.reason ?? '', /^action 1 \(command\) failed: it exited with code 3/);
  t.deepEqual(done.map((what) => what.split('@')[0]), ['restart']);
});

test('daylight saving in Europe/Berlin: a fixed time in the gap runs once after it, one in the repeated hour runs once; an hourly one skips the gap and runs both repeated hours', (t) => {
  // Spring forward: 2026-03-29 02:00 local does not exist (01:59:59 CET is followed by 03:00:00 CEST).
  const fixed = cronOf('30 2 * * *', 'Europe/Berlin');
  t.deepEqual(nextDues(fixed, Date.parse('2026-03-28T12:00:00Z'), 3).map(iso), ['2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z', '2026-03-31T00:30:00.000Z']);
  // Fall back: 2026-10-25 02:30 local comes twice (00:30 UTC in CEST, 01:30 UTC in CET); it runs at the first.
  t.deepEqual(nextDues(fixed, Date.parse('2026-10-24T12:00:00Z'), 2).map(iso), ['2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z']);
  const hourly = cronOf('15 * * * *', 'Europe/Berlin');
  const spring = duesBetween(hourly, Date.parse('2026-03-28T23:30:00Z'), Date.parse('2026-03-29T02:30:00Z')).dues.map(iso);
  t.deepEqual(spring, ['2026-03-29T00:15:00.000Z', '2026-03-29T01:15:00.000Z', '2026-03-29T02:15:00.000Z'], '00:15, 01:15 CET, then 03:15 CEST: the gap\'s 02:15 never is');
  const fall = duesBetween(hourly, Date.parse('2026-10-24T23:30:00Z'), Date.parse('2026-10-25T02:30:00Z')).dues.map(iso);
  t.deepEqual(fall, ['2026-10-25T00:15:00.000Z', '2026-10-25T01:15:00.000Z', '2026-10-25T02:15:00.000Z'], '02:15 CEST, 02:15 CET, 03:15 CET: the repeated hour runs twice, an hour apart');
});

test('the scheduler runs a fixed-time job once across a fall-back night, the clock in hand', async (t) => {
  const { store, clock, done } = rig(t, '2026-10-25T00:00:00.000Z');
  await store.create('sch_000000000000000e', BOT, spec({ cron: '30 2 * * *', time_zone: 'Europe/Berlin', actions: [{ type: 'restart' }] }), clock.ms);
  for (const at of ['2026-10-25T00:30:01.000Z', '2026-10-25T01:00:00.000Z', '2026-10-25T01:30:01.000Z', '2026-10-25T02:00:00.000Z']) {
    clock.ms = Date.parse(at);
    await settle();
  }
  await eventually(() => done.length >= 1, 1_000);
  await settle();
  t.deepEqual(done, ['restart@2026-10-25T00:30:01.000Z']);
});

test("a chain does not wait for its start to be told: with the history's writes held, it runs and keeps its lease", async (t) => {
  let release = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  t.teardown(async () => release());
  const { store, clock, done } = rig(t, '2026-03-01T10:00:30.000Z', {}, undefined, 'agent-a', 15_000, (type) => (type === 'schedule-started' ? held : Promise.resolve()));
  await store.create('sch_0000000000000009', BOT, spec({ cron: '* * * * *', actions: [{ type: 'restart' }] }), clock.ms);
  await settle();
  clock.ms = Date.parse('2026-03-01T10:01:00.100Z');
  t.true(await eventually(() => done.length === 1, 2_000), 'the chain ran while its start was still being told');
  t.true(await eventually(async () => (await store.runs('sch_0000000000000009', 1))[0]?.state === 'succeeded', 2_000));
  release();
});

test(`schedules due in one minute run at most ${ACTIONS_AT_ONCE} commands at once; the others wait their turn and all run`, async (t) => {
  let going = 0;
  let most = 0;
  let ran = 0;
  let release = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  t.teardown(async () => release());
  const command: ScheduleActions['command'] = async () => {
    going += 1;
    most = Math.max(most, going);
    await held;
    going -= 1;
    ran += 1;
    return { exitCode: 0, output: '', truncated: false, timedOut: false, message: null };
  };
  const { store, clock } = rig(t, '2026-03-01T10:00:30.000Z', { command });
  const schedules = 3 * ACTIONS_AT_ONCE;
  for (let n = 0; n < schedules; n += 1) {
    await store.create(`sch_00000000000001${String(n).padStart(2, '0')}`, `${BOT}${n % 3}`, spec({ cron: '* * * * *', actions: [{ type: 'command', command: ['true'] }] }), clock.ms);
  }
  await settle();
  clock.ms = Date.parse('2026-03-01T10:01:00.100Z');
  t.true(await eventually(() => going === ACTIONS_AT_ONCE, 2_000), `${going} commands under way`);
  await settle();
  t.is(most, ACTIONS_AT_ONCE, 'never more at once');
  release();
  t.true(await eventually(() => ran === schedules, 2_000), `${ran} of ${schedules} ran`);
  t.is(most, ACTIONS_AT_ONCE);
});
