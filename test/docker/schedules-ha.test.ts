import test from 'ava';
import pg from 'pg';
import { runAgentProcess } from '../helpers/agent-process.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import type { TestBot } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { dropDatabases, freshDatabase } from '../helpers/postgres.js';

// Three agents over one engine and one PostgreSQL (docs/api.md §18): 200 schedules due every minute, each run
// counted from the bots' side, one agent SIGKILLed in the middle of the chains of a due minute and started
// again. Every due time is run exactly once, or marked cut; no chain ever starts twice. CI runs three due
// minutes; `SCHEDULES_HA_MINUTES=10` is the whole ten.
const fixture = new DockerFixture();
const BOTS = 10;
const PER_BOT = 20;
const MINUTES = Math.max(3, Number(process.env.SCHEDULES_HA_MINUTES ?? 3));
/** The chain: a line when it starts, another five seconds later; the kill lands between them. */
const chainOf = (name: string) => [
  { type: 'command', command: ['sh', '-c', `echo "${name} start $(date +%s)" >> /tmp/runs`] },
  { type: 'command', offset_s: 5, command: ['sh', '-c', `echo "${name} end $(date +%s)" >> /tmp/runs`] },
];

interface Run {
  due_at: string;
  state: string;
  reason: string | null;
}

const minuteOf = (ms: number) => Math.floor(ms / 60_000) * 60_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test.before(() => fixture.ready());
test.after.always(async () => {
  await fixture.cleanup();
  await dropDatabases();
});

test(`three agents, ${BOTS * PER_BOT} schedules every minute for ${MINUTES} minutes, one agent SIGKILLed mid-chain: each due time run once or cut, never twice`, async (t) => {
  t.timeout((MINUTES + 6) * 60_000);
  const databaseUrl = await freshDatabase();
  const env = { AGENT_DATABASE_URL: databaseUrl };
  // One at a time: the first makes the database's tables.
  const agents: Array<Awaited<ReturnType<typeof runAgentProcess>>> = [];
  for (let n = 0; n < 3; n += 1) agents.push(await runAgentProcess(env));
  t.teardown(() => agents.forEach((agent) => agent.process.kill('SIGKILL')));
  const api = (path: string, init: { method?: string; body?: unknown } = {}) =>
    fetch(`http://127.0.0.1:${agents[0]!.port}${path}`, {
      method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
      headers: { 'content-type': 'application/json' },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });

  const bots: TestBot[] = await Promise.all(Array.from({ length: BOTS }, () => fixture.runBot()));
  const scheduleIds = new Map<string, { botId: string; name: string }>();
  for (const [index, bot] of bots.entries()) {
    for (let n = 0; n < PER_BOT; n += 1) {
      const name = `bot${index}-${n}`;
      const reply = await api(`/api/admin/bots/${bot.id}/schedules`, { body: { name, cron: '* * * * *', actions: chainOf(name) } });
      const text = await reply.text();
      t.is(reply.status, 201, text);
      const { schedule } = JSON.parse(text) as { schedule: { id: string } };
      scheduleIds.set(schedule.id, { botId: bot.id, name });
    }
  }
  // Due times from the first whole minute every agent has read the schedules by (they read them every 5 s).
  const first = minuteOf(Date.now() + 6_000) + 60_000;
  const last = first + (MINUTES - 1) * 60_000;
  const killed = first + 60_000;

  // In the second due minute: the third agent dies once it holds chains between their two lines.
  await sleep(killed - Date.now());
  const victim = agents[2]!;
  const database = new pg.Client({ connectionString: databaseUrl });
  await database.connect();
  t.teardown(() => database.end());
  const held = async () =>
    Number((await database.query("SELECT count(*) AS n FROM schedule_runs WHERE state = 'running' AND due_ms = $1 AND agent LIKE $2", [killed, `%/${victim.process.pid}/%`])).rows[0].n);
  t.true(await eventually(async () => (await held()) > 0, 30_000, 50), 'the third agent claimed chains of the minute');
  await sleep(1_500);
  victim.process.kill('SIGKILL');
  agents[2] = await runAgentProcess(env);

  // Past the last due minute's chains, and past the killed agent's leases (15 s) and the sweep that cuts them.
  await sleep(last + 45_000 - Date.now());
  const runsOf = async (id: string, botId: string) =>
    ((await (await fetch(`http://127.0.0.1:${agents[1]!.port}/api/bots/${botId}/schedules/${id}/runs`)).json()) as { runs: Run[] }).runs;
  const runs = new Map<string, Run[]>();
  const settled = await eventually(async () => {
    for (const [id, { botId }] of scheduleIds) {
      if (runs.get(id)?.every((run) => run.state !== 'running')) continue;
      runs.set(id, await runsOf(id, botId));
    }
    return [...runs.values()].every((listed) => listed.every((run) => run.state !== 'running'));
  }, 60_000, 1_000);
  t.true(settled, 'every run has ended or been cut');

  // The bots' own count: a line per chain started, a line per chain that reached its second action.
  const lines = new Map<string, { starts: number[]; ends: number[] }>();
  for (const bot of bots) {
    for (const line of (await fixture.exec(bot, 'cat /tmp/runs')).split('\n')) {
      const [name, what, at] = line.split(' ');
      if (!name || !at) continue;
      const entry = lines.get(name) ?? { starts: [], ends: [] };
      (what === 'start' ? entry.starts : entry.ends).push(minuteOf(Number(at) * 1000));
      lines.set(name, entry);
    }
  }

  let cut = 0;
  const dues = Array.from({ length: MINUTES }, (_, n) => first + n * 60_000);
  for (const [id, { name }] of scheduleIds) {
    const byDue = new Map((runs.get(id) ?? []).map((run) => [Date.parse(run.due_at), run]));
    const { starts, ends } = lines.get(name) ?? { starts: [], ends: [] };
    for (const due of dues) {
      const run = byDue.get(due);
      const startsThen = starts.filter((minute) => minute === due).length;
      t.true(startsThen <= 1, `${name} at ${new Date(due).toISOString()}: started ${startsThen} times`);
      if (run?.state === 'cut') {
        cut += 1;
        t.is(due, killed, `${name}: only the killed agent's chains are cut (${run.reason})`);
        continue;
      }
      t.is(run?.state, 'succeeded', `${name} at ${new Date(due).toISOString()}: ${JSON.stringify(run)}`);
      t.is(startsThen, 1, `${name} at ${new Date(due).toISOString()}: started once`);
      t.is(ends.filter((minute) => minute === due).length, 1, `${name} at ${new Date(due).toISOString()}: ended once`);
    }
    t.is(new Set(starts).size, starts.length, `${name}: no minute's chain started twice (${starts.map((minute) => new Date(minute).toISOString()).join(', ')})`);
  }
  t.true(cut > 0, 'the kill landed in the middle of chains, which are cut, not run again');
  t.log(`${scheduleIds.size} schedules × ${MINUTES} minutes, ${cut} chains cut by the kill`);
});
