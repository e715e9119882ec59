import test from 'ava';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { runAgentProcess, webhookReceiver } from '../helpers/agent-process.js';
import { dropDatabases, freshDatabase } from '../helpers/postgres.js';
import { openStream } from '../helpers/sse-client.js';
import { HEALTH_GRACE_LABEL } from '../../src/runtime/labels.js';

// Two agents over the real engine keeping one history in a real PostgreSQL database (AGENT_DATABASE_URL,
// docs/api.md §11): whichever answers, the same records, state and events, with the same cursors, and one
// lifecycle budget per bot (2 operations a minute here).
const fixture = new DockerFixture();
let one: TestAgent;
let other: TestAgent;
let databaseUrl: string;

test.before(async () => {
  await fixture.ready();
  databaseUrl = await freshDatabase();
  // Each agent's watchdog looks after this file's bots only: other files' bots on the same engine are theirs.
  const watchdog = { watches: (botId: string) => botId.endsWith(fixture.runId) };
  one = await startAgent(createDockerDriver({ dockerHost: fixture.dockerHost }), { databaseUrl, rateLimit: 2, watchdog });
  other = await startAgent(createDockerDriver({ dockerHost: fixture.dockerHost }), { databaseUrl, rateLimit: 2, watchdog });
});

test.after.always(async () => {
  await one?.close();
  await other?.close();
  await fixture.cleanup();
  await dropDatabases();
});

test('a bot that crashes three times: both agents answer the same records and state, each run recorded once', async (t) => {
  // Its first three runs fail; the engine starts it again each time (the file outlives each run).
  const script = 'n=$(($(cat /tmp/runs 2>/dev/null || echo 0) + 1)); echo $n > /tmp/runs; echo "run $n"; [ $n -le 3 ] && exit 3; exec sleep 1000';
  const bot = await fixture.runBot({ script, restartPolicy: 'on-failure' });
  const exitsFrom = async (agent: TestAgent) => (await call(agent.server, `/api/bots/${bot.id}/exits?limit=50`)).body?.exits as unknown[];
  t.true(await eventually(async () => (await exitsFrom(one)).length === 3 && (await exitsFrom(other)).length === 3, 30_000, 100));
  t.deepEqual(await exitsFrom(one), await exitsFrom(other));
  // Each agent follows the engine on its own: their views of the fourth run converge, their records are one.
  const statuses = async () => Promise.all([call(one.server, `/api/bots/${bot.id}`), call(other.server, `/api/bots/${bot.id}`)]);
  let [statusOne, statusOther] = await statuses();
  await eventually(async () => {
    [statusOne, statusOther] = await statuses();
    return JSON.stringify(statusOne.body?.bot) === JSON.stringify(statusOther.body?.bot) && (statusOne.body?.bot as { started_at?: unknown }).started_at !== null;
  }, 15_000, 100);
  t.like(statusOne.body?.bot, { state: 'crash-looping', crashes_last_hour: 3 });
  t.regex(String((statusOne.body?.bot as { last_exit: { logs: string } }).last_exit.logs), /^run 3\n$/);
  t.deepEqual(statusOne.body?.bot, statusOther.body?.bot);
});

test('an event one agent records reaches a stream held open by the other; a cursor from one resumes at the other with nothing skipped', async (t) => {
  const bot = await fixture.runBot();
  const onOther = await openStream(other.server, `/api/bots/${bot.id}/events`);
  t.is(onOther.status, 200);
  // A stop through the first agent: its `operation` event is recorded there.
  const stopped = await call(one.server, '/api/bots/stop', { method: 'POST', body: { bot_id: bot.id, user_id: 'user_1' } });
  t.is(stopped.status, 200, stopped.text);
  const operation = await onOther.next((event) => event.event === 'operation');
  t.like(operation.data, { operation: 'stop', result: 'ok', by: 'platform' });
  await onOther.next((event) => event.event === 'exited');
  onOther.close();

  const [first] = onOther.events;
  const fromOne = await openStream(one.server, `/api/bots/${bot.id}/events`, { headers: { 'last-event-id': '0' } });
  const fromOther = await openStream(other.server, `/api/bots/${bot.id}/events`, { headers: { 'last-event-id': first!.id ?? '' } });
  const everything = await fromOne.next((event) => event.id === onOther.events.at(-1)!.id);
  t.truthy(everything);
  await fromOther.next((event) => event.id === onOther.events.at(-1)!.id);
  const after = fromOne.events.slice(fromOne.events.findIndex((event) => event.id === first!.id) + 1);
  t.deepEqual(fromOther.events.map((event) => event.id), after.map((event) => event.id), 'the same events after the cursor, at either agent');
  fromOne.close();
  fromOther.close();
});

test("a bot's lifecycle budget holds across agents: two restarts through either, the third refused by the other", async (t) => {
  const bot = await fixture.runBot();
  const restart = (agent: TestAgent) => call(agent.server, '/api/bots/restart', { method: 'POST', body: { bot_id: bot.id, user_id: 'user_1' } });
  t.is((await restart(one)).status, 200);
  t.is((await restart(other)).status, 200);
  const refused = await restart(one);
  t.is(refused.status, 429, refused.text);
  t.regex(String(refused.body?.msg), /too many lifecycle operations on bot .*: at most 2 in 60 s/);
  t.is((await restart(other)).status, 429);
});

test.serial('a webhook receiver gets every event of a bot, in order, none missing, when the agent delivering one is SIGKILLed mid-delivery', async (t) => {
  const secret = 'shared-history-hooks';
  // The engine is shared with other test files: the delivery held is the first of this test's bot.
  let botId: string | undefined;
  const hooks = await webhookReceiver(0, secret, { holdFirst: (event) => event.bot_id === botId });
  t.teardown(() => void hooks.server.close());
  // Its own database: only this test's events are delivered.
  const hookDatabase = await freshDatabase();
  const webhook = { AGENT_DATABASE_URL: hookDatabase, AGENT_WEBHOOK_URL: hooks.url, AGENT_WEBHOOK_SECRET: secret, DOCKER_HOST: fixture.dockerHost };
  const dying = await runAgentProcess(webhook);
  t.teardown(() => void dying.process.kill('SIGKILL'));
  const bot = await fixture.runBot({ start: false });
  botId = bot.id;
  await bot.container.start();
  await hooks.held;
  dying.process.kill('SIGKILL');
  // The survivor records more of the bot's life; the delivery the dead agent had claimed is made once its claim lapses.
  const survivor = await startAgent(createDockerDriver({ dockerHost: fixture.dockerHost }), {
    databaseUrl: hookDatabase,
    webhook: { url: hooks.url, secret },
  });
  t.teardown(() => survivor.close());
  t.is((await call(survivor.server, '/api/bots/stop', { method: 'POST', body: { bot_id: bot.id, user_id: 'user_1' } })).status, 200);
  const kept = async () => {
    const stream = await openStream(survivor.server, `/api/bots/${bot.id}/events`, { headers: { 'last-event-id': '0' } });
    // The stop's operation event is written after its reply, so it may come after the exit.
    await stream.next((event) => event.event === 'exited');
    await stream.next((event) => event.event === 'operation');
    stream.close();
    return stream.events.map((event) => event.id);
  };
  const ids = await kept();
  t.true(ids.length >= 3, `started, operation, exited: ${ids.join(' ')}`);
  const got = () => hooks.received.filter((delivery) => JSON.parse(delivery.body).bot_id === bot.id).map((delivery) => delivery.id);
  t.true(await eventually(() => ids.every((id) => got().includes(id!)), 45_000, 250), `delivered: ${got().join(' ')} of ${ids.join(' ')}`);
  const firsts = [...new Set(got())];
  t.deepEqual(firsts, ids, 'in order, each at least once');
  t.true(hooks.received.every((delivery) => delivery.signatureOk));
});

test('a bot unhealthy past its grace is restarted by exactly one of the two agents, once (docs/api.md §13)', async (t) => {
  // Its check fails from the start, and in every run after (the file it wants never comes).
  const bot = await fixture.runBot({ healthcheck: 'test -f /tmp/never || { echo stuck; exit 1; }', labels: { [HEALTH_GRACE_LABEL]: '5' } });
  const streams = await Promise.all([one, other].map((agent) => openStream(agent.server, `/api/bots/${bot.id}/events`)));
  const restarted = await streams[0]!.next((event) => event.event === 'restarted', 30_000);
  t.like(restarted.data, { reason: 'unhealthy', check: 'exec', output: 'stuck' });
  await streams[1]!.next((event) => event.id === restarted.id, 5_000);
  const firstRun = restarted.data.at as string;
  // Each agent's watchdog saw the bot past its grace; their claims of the run were one: one restart of it, by one.
  const restartsBy = async (agent: TestAgent) => {
    const text = (await call(agent.server, '/metrics')).text;
    return Number(/bot_agent_watchdog_restarts_total\{check="exec"\} (\d+)/.exec(text)?.[1] ?? 0);
  };
  t.true(await eventually(async () => (await fixture.restartEvents(bot, Math.floor(Date.parse(firstRun) / 1000) - 1)) >= 1, 15_000, 200));
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  t.is(await fixture.restartEvents(bot, Math.floor(Date.parse(firstRun) / 1000) - 1), 1, 'the engine restarted it once');
  t.deepEqual((await Promise.all([restartsBy(one), restartsBy(other)])).sort(), [0, 1], 'one agent claimed it, the other did not');
  t.is(streams[0]!.events.filter((event) => event.event === 'restarted' && Date.parse(String(event.data.at)) < Date.parse(firstRun) + 4_000).length, 1);
  // Whichever agent wrote the run's end, it is an end for the bot's health: both agents answer it so.
  const exitsFrom = async (agent: TestAgent) => (await call(agent.server, `/api/bots/${bot.id}/exits`)).body?.exits as Array<Record<string, unknown>>;
  t.true(await eventually(async () => (await exitsFrom(one)).length >= 1, 15_000, 100));
  t.like((await exitsFrom(one))[0], { requested: false, unhealthy: { check: 'exec', output: 'stuck' } });
  t.deepEqual((await exitsFrom(one))[0], (await exitsFrom(other))[0]);
  for (const stream of streams) stream.close();
  await bot.container.remove({ force: true });
});
