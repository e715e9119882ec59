import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { webhookReceiver } from '../helpers/agent-process.js';
import type { WebhookReceiver } from '../helpers/agent-process.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import type { TestBot } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { OwnPostgres } from '../helpers/postgres.js';
import { openStream } from '../helpers/sse-client.js';

// The history's PostgreSQL stopped, then frozen (SIGSTOP of its every process), for 30 s each, under an agent on
// the real engine serving a bot called every 100 ms and watching a crash-looping one (docs/api.md §11). The server
// is this file's own (scripts/postgres.sh, its own folder and port): other files' server is never touched.
const OUTAGE_MS = 30_000;
const RESTART_DEADLINE_MS = 20_000;
/** What a read of logs or stats may take, database or not. */
const READ_DEADLINE_MS = 5_000;
const SECRET = 'faults-secret';

const fixture = new DockerFixture();
const server = new OwnPostgres('faults', 25433);
let databaseUrl: string;
let agent: TestAgent;
let receiver: WebhookReceiver;
let crasher: TestBot;
let worker: TestBot;

test.before(async () => {
  await fixture.ready();
  databaseUrl = await server.freshDatabase(await server.start());
  receiver = await webhookReceiver(0, SECRET);
  agent = await startAgent(createDockerDriver({ dockerHost: fixture.dockerHost }), {
    databaseUrl,
    dataDir: mkdtempSync(join(tmpdir(), 'bot-agent-faults-')),
    webhook: { url: receiver.url, secret: SECRET },
    rateLimit: 1_000,
    restartTimeoutMs: RESTART_DEADLINE_MS,
    recoverAfterMs: 3_600_000,
  });
  // Dies after 11 s, every run; the engine starts it again whatever the agent does, at once (a run of 10 s or more
  // resets the engine's back-off): two or three runs end in each outage.
  crasher = await fixture.runBot({ script: 'echo "run at $(date +%s)"; sleep 11; exit 3', restartPolicy: 'always' });
  worker = await fixture.runBot();
});

test.after.always(async () => {
  server.thaw();
  await agent?.close();
  await server.stop().catch(() => undefined);
  receiver?.server.close();
  await fixture.cleanup();
});

/** Runs of the crasher that have ended, as the engine counts them. */
async function endedRuns(bot: TestBot): Promise<number> {
  const info = await bot.container.inspect();
  return info.RestartCount + (info.State.Running ? 0 : 1);
}

async function metric(of: TestAgent, name: string): Promise<number | undefined> {
  const text = (await call(of.server, '/metrics')).text;
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

interface Answer {
  readonly what: string;
  readonly status: number;
  readonly ms: number;
  readonly deadlineMs: number;
}

/** Calls the worker every 100 ms for `ms`: stats and logs, and every 3 s a restart, a stop and a start, each timed. */
async function callWorker(of: TestAgent, ms: number): Promise<Answer[]> {
  const answers: Answer[] = [];
  const timed = async (what: string, path: string, deadlineMs: number, body?: unknown): Promise<void> => {
    const began = performance.now();
    const reply = await call(of.server, path, body === undefined ? {} : { method: 'POST', body });
    answers.push({ what, status: reply.status, ms: performance.now() - began, deadlineMs });
  };
  const owner = { bot_id: worker.id, user_id: 'user_1' };
  const ends = Date.now() + ms;
  for (let round = 0; Date.now() < ends; round += 1) {
    await timed('stats', `/api/bots/${worker.id}/stats`, READ_DEADLINE_MS);
    await timed('logs', `/api/bots/${worker.id}/logs?lines=5`, READ_DEADLINE_MS);
    if (round % 30 === 0) {
      await timed('restart', '/api/bots/restart', RESTART_DEADLINE_MS, owner);
      await timed('stop', '/api/bots/stop', RESTART_DEADLINE_MS, owner);
      await timed('start', '/api/bots/start', RESTART_DEADLINE_MS, owner);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return answers;
}

/** Every answer was 200 within its deadline. */
function allAnswered(t: ExecutionContext, answers: Answer[]): void {
  const late = answers.filter((answer) => answer.status !== 200 || answer.ms > answer.deadlineMs);
  t.deepEqual(late, [], 'every call answered 200 within its deadline');
  t.true(answers.filter((answer) => answer.what === 'restart').length >= 2);
}

/** Once the database answers again: nothing waits, every run that ended is recorded once, its event sent once, cursors in order. */
async function nothingLost(t: ExecutionContext): Promise<void> {
  t.true(await eventually(async () => (await metric(agent, 'bot_agent_database_up')) === 1 && (await metric(agent, 'bot_agent_history_spool_writes')) === 0, 30_000, 200));
  const exits = async () => ((await call(agent.server, `/api/bots/${crasher.id}/exits?limit=50`)).body?.exits as unknown[]).length;
  t.true(await eventually(async () => (await exits()) === (await endedRuns(crasher)), 15_000, 200), 'one exit record for each run the engine ended');
  const stream = await openStream(agent.server, `/api/events`, { headers: { 'last-event-id': '0' } });
  const expected = await exits();
  await eventually(() => stream.events.filter((event) => event.event === 'exited' && (event.data as { bot_id: string }).bot_id === crasher.id).length >= expected, 10_000, 100);
  stream.close();
  const cursors = stream.events.map((event) => Number(event.id));
  t.deepEqual(cursors, [...cursors].sort((a, b) => a - b), 'cursors in order');
  t.is(new Set(cursors).size, cursors.length, 'each event once');
  const crasherExits = stream.events.filter((event) => event.event === 'exited' && (event.data as { bot_id: string }).bot_id === crasher.id);
  t.is(crasherExits.length, expected, "one 'exited' event for each record");
  const operations = stream.events.filter((event) => event.event === 'operation' && (event.data as { bot_id: string }).bot_id === worker.id);
  t.true(operations.length >= 3);
  // Every event kept was delivered to the webhook, once it could be.
  const ids = new Set(stream.events.map((event) => event.id));
  t.true(await eventually(() => [...ids].every((id) => receiver.received.some((delivery) => JSON.parse(delivery.body).id === id)), 30_000, 200), 'every event delivered');
}

async function outage(t: ExecutionContext, begin: () => Promise<void> | void, end: () => Promise<unknown> | void): Promise<void> {
  t.true(await eventually(async () => (await endedRuns(crasher)) >= 1 && (await metric(agent, 'bot_agent_database_up')) === 1, 30_000, 200));
  const normal = await callWorker(agent, 5_000);
  const runsBefore = await endedRuns(crasher);
  await begin();
  const answers = await callWorker(agent, OUTAGE_MS);
  t.is(await metric(agent, 'bot_agent_database_up'), 0, '/metrics says the database is away');
  t.true((await metric(agent, 'bot_agent_history_spool_writes'))! > 0, 'what must be recorded waits in the spool');
  t.true((await endedRuns(crasher)) > runsBefore, 'the crasher ended runs during the outage');
  t.is((await call(agent.server, '/readyz')).status, 200, '/readyz stays ready');
  const status = await call(agent.server, `/api/bots/${worker.id}`);
  t.is(status.status, 503);
  t.regex(String(status.body?.msg), /database does not answer/);
  const spooled = await metric(agent, 'bot_agent_history_spool_writes');
  const ended = performance.now();
  await end();
  allAnswered(t, answers);
  await nothingLost(t);
  t.log(`before: slowest ${figures(normal)}`);
  t.log(`during: ${answers.length} calls; slowest ${figures(answers)}; ${spooled} writes spooled; all written ${Math.round(performance.now() - ended)} ms after the database answered again`);
}

/** The slowest answer of each kind of call, in ms. */
function figures(answers: Answer[]): string {
  const slowest = new Map<string, number>();
  for (const answer of answers) slowest.set(answer.what, Math.max(slowest.get(answer.what) ?? 0, answer.ms));
  return [...slowest].map(([what, ms]) => `${what} ${Math.round(ms)} ms`).join(', ');
}

test.serial('PostgreSQL stopped for 30 s: every call answers in time, and afterwards every run that ended has its record, event and webhook; an agent started meanwhile serves', async (t) => {
  await outage(
    t,
    async () => {
      await server.stop();
      // An agent that starts while the database is away starts and serves.
      const late = await startAgent(createDockerDriver({ dockerHost: fixture.dockerHost }), {
        databaseUrl,
        rateLimit: 1_000,
        webhook: { url: receiver.url, secret: SECRET },
      });
      t.teardown(late.close);
      t.is((await call(late.server, `/api/bots/${worker.id}/stats`)).status, 200);
      t.is(await metric(late, 'bot_agent_database_up'), 0);
    },
    () => server.start(),
  );
});

test.serial('PostgreSQL frozen (SIGSTOP) for 30 s: every call answers in time, and afterwards nothing is lost', async (t) => {
  await outage(
    t,
    () => server.freeze(),
    () => server.thaw(),
  );
});
