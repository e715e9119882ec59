import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { pino } from 'pino';
import { assembleAgent } from '../../src/agent.js';
import type { Agent } from '../../src/agent.js';
import type { ExitRecord } from '../../src/history/history-store.js';
import { listen } from '../../src/http/listen.js';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { createDockerProvisioner } from '../../src/runtime/docker/docker-provisioner.js';
import { TEST_APP_CONFIG } from '../helpers/agent.js';
import { webhookReceiver } from '../helpers/agent-process.js';
import type { WebhookReceiver } from '../helpers/agent-process.js';
import { DockerFixture, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { lineSink } from '../helpers/log-sink.js';
import { openStream } from '../helpers/sse-client.js';
import type { EventStream } from '../helpers/sse-client.js';

// Hung bots on the real engine (docs/api.md §13): a failing HEALTHCHECK and stopped heartbeats each get the
// bot restarted by the watchdog, once, with its record, events and webhook saying why; healthy bots are left be.

const fixture = new DockerFixture();
const driver = createDockerDriver({ dockerHost: fixture.dockerHost });
const SECRET = 'health-webhook-secret';
const GRACE_S = 5;
const logLines: string[] = [];
let agent: Agent;
let server: Server;
let hooks: WebhookReceiver;
let events: EventStream;
/** The agent as the bots reach it from their network. */
let target: { host: string; port: number };

test.before(async () => {
  await fixture.ready();
  const network = await fixture.network();
  hooks = await webhookReceiver(0, SECRET);
  agent = assembleAgent({
    driver,
    provisioner: createDockerProvisioner({ dockerHost: fixture.dockerHost, network: network.name, agentUrl: 'http://agent:8000' }),
    config: { ...TEST_APP_CONFIG, webhook: { url: hooks.url, secret: SECRET } },
    logger: pino(lineSink(logLines)),
    // This file's bots only: other files' bots on the same engine are theirs to restart.
    watchdog: { watches: (botId) => botId.endsWith(fixture.runId) },
  });
  server = await listen(agent.app, '0.0.0.0', 0);
  target = { host: network.gateway, port: (server.address() as AddressInfo).port };
  events = await openStream(server, '/api/events?after=0');
});

test.after.always(async () => {
  events?.close();
  server?.close();
  await agent?.close();
  hooks?.server.close();
  await fixture.cleanup();
});

/** A bot made through the API with `health`, removed when the test ends. */
async function create(t: ExecutionContext, script: string, health: Record<string, unknown>): Promise<string> {
  const id = fixture.newBotId();
  t.teardown(() => fixture.docker.getContainer(id).remove({ force: true }).catch(() => undefined));
  const body = {
    bot_id: id,
    user_id: 'user_1',
    image: TEST_IMAGE,
    template: 'discord',
    token: 'tok-health',
    command: ['sh', '-c', script],
    env: { AGENT_HOST: target.host, AGENT_PORT: String(target.port) },
    health,
  };
  const reply = await call(server, '/api/admin/bots', { body });
  t.is(reply.status, 201, reply.text);
  return id;
}

async function statusOf(botId: string): Promise<Record<string, unknown>> {
  const reply = await call(server, `/api/bots/${botId}`);
  if (reply.status !== 200) throw new Error(`status of ${botId}: ${reply.status} ${reply.text}`);
  return reply.body?.bot as Record<string, unknown>;
}

const healthOf = async (botId: string) => (await statusOf(botId)).health as { status: string; check: string | null; since: string | null; output: string | null };

async function exitsOf(botId: string): Promise<ExitRecord[]> {
  return (await call(server, `/api/bots/${botId}/exits`)).body?.exits as ExitRecord[];
}

/** The bot's newest exit record, once it has one. */
async function lastExit(botId: string): Promise<ExitRecord | undefined> {
  await eventually(async () => (await exitsOf(botId)).length > 0, 20_000, 100);
  return (await exitsOf(botId))[0];
}

async function startedAt(botId: string): Promise<string> {
  return (await fixture.docker.getContainer(botId).inspect()).State.StartedAt;
}

async function exec(botId: string, command: string): Promise<void> {
  const run = await fixture.docker.getContainer(botId).exec({ Cmd: ['sh', '-c', command] });
  await run.start({});
  await eventually(async () => !(await run.inspect()).Running, 5_000, 50);
}

/** A bot whose check passes while /tmp/ok exists; it makes the file as it starts (the file survives a restart, so rm lasts). */
const CHECKED_BOT = "[ -f /tmp/broken ] || touch /tmp/ok; trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done";
const CHECK = { exec: ['sh', '-c', 'test -f /tmp/ok || { echo "gateway lost: no /tmp/ok"; exit 1; }'], interval_s: 1, timeout_s: 1, retries: 2, grace_s: GRACE_S };

/** A bot that beats every second while /tmp/beat exists, made as it starts. */
const BEATING_BOT = [
  'touch /tmp/beat',
  "trap 'exit 0' TERM",
  'while :; do',
  '  [ -f /tmp/beat ] && printf "POST /api/bots/self/heartbeat HTTP/1.0\\r\\nHost: agent\\r\\nContent-Length: 0\\r\\n\\r\\n" | nc "$AGENT_HOST" "$AGENT_PORT" > /dev/null 2>&1',
  '  sleep 1 & wait $!',
  'done',
].join('\n');

test('a bot whose check starts failing is restarted by the watchdog within its grace and one interval, once; its record, events and webhook say why', async (t) => {
  const botId = await create(t, CHECKED_BOT, CHECK);
  t.true(await eventually(async () => (await healthOf(botId)).status === 'healthy', 20_000, 200), 'the check passes first');
  const firstRun = await startedAt(botId);
  // The bot hangs as far as its check can tell; it stays hung after the restart until the file is back.
  await exec(botId, 'rm /tmp/ok; touch /tmp/broken');

  const unhealthy = await events.next((event) => event.event === 'unhealthy' && event.data.bot_id === botId, 15_000);
  t.like(unhealthy.data, { check: 'exec' });
  t.regex(String(unhealthy.data.output), /gateway lost: no \/tmp\/ok/);
  const health = await healthOf(botId);
  t.true(health.status === 'unhealthy' || (await startedAt(botId)) !== firstRun, `status ${health.status}`);

  const restarted = await events.next((event) => event.event === 'restarted' && event.data.bot_id === botId, 20_000);
  t.like(restarted.data, { reason: 'unhealthy', check: 'exec' });
  t.regex(String(restarted.data.output), /gateway lost/);
  const waited = Date.parse(String(restarted.data.at)) - Date.parse(String(restarted.data.unhealthy_since));
  t.true(waited >= GRACE_S * 1000 && waited <= (GRACE_S + CHECK.interval_s + 1) * 1000, `restarted ${waited} ms after it turned unhealthy`);

  t.true(await eventually(async () => (await startedAt(botId)) !== firstRun, 20_000, 100), 'the container runs again');
  const exit = await lastExit(botId);
  t.like(exit, { requested: false, unhealthy: { check: 'exec' } });
  t.regex(String(exit?.unhealthy?.output), /gateway lost/);
  t.is((await statusOf(botId)).crashes_last_hour, 1, 'a restart for health counts as a crash');

  const delivered = await eventually(() => ['unhealthy', 'restarted'].every((type) => hooks.received.some((d) => d.type === type && d.body.includes(botId))), 10_000, 100);
  t.true(delivered, 'both events reach the webhook');
  t.true(hooks.received.filter((d) => d.body.includes(botId)).every((d) => d.signatureOk));

  // Still hung in its new run: the watchdog acts again only once that run has been unhealthy for its grace.
  const secondRun = await startedAt(botId);
  const next = await events.next((event) => event.event === 'restarted' && event.data.bot_id === botId && event.id !== restarted.id, 30_000);
  t.true(Date.parse(String(next.data.at)) - Date.parse(secondRun) >= GRACE_S * 1000, 'once per run, after the grace');
});

test('a bot that stops its heartbeats is restarted likewise; beating again after the restart, it is healthy and left be', async (t) => {
  const botId = await create(t, BEATING_BOT, { heartbeat: { ttl_s: 5 }, grace_s: GRACE_S });
  t.true(await eventually(async () => (await healthOf(botId)).status === 'healthy', 20_000, 200), 'its beats arrive');
  t.like(await healthOf(botId), { check: 'heartbeat', output: null });
  const firstRun = await startedAt(botId);
  await exec(botId, 'rm /tmp/beat');

  const unhealthy = await events.next((event) => event.event === 'unhealthy' && event.data.bot_id === botId, 15_000);
  t.like(unhealthy.data, { check: 'heartbeat' });
  t.regex(String(unhealthy.data.output), /no heartbeat for \d+ s/);
  const restarted = await events.next((event) => event.event === 'restarted' && event.data.bot_id === botId, 20_000);
  t.like(restarted.data, { reason: 'unhealthy', check: 'heartbeat' });
  t.true(await eventually(async () => (await startedAt(botId)) !== firstRun, 20_000, 100), 'the container runs again');
  const exit = await lastExit(botId);
  t.like(exit, { requested: false, unhealthy: { check: 'heartbeat' } });

  // The new run beats again (its script makes the file): healthy, and not restarted again.
  const secondRun = await startedAt(botId);
  t.true(await eventually(async () => (await healthOf(botId)).status === 'healthy', 20_000, 200), 'healthy again');
  await new Promise((resolve) => setTimeout(resolve, (5 + GRACE_S + 2) * 1000));
  t.is(await startedAt(botId), secondRun, 'not restarted again');
  t.is(events.events.filter((event) => event.event === 'restarted' && event.data.bot_id === botId).length, 1);
});

test('healthy bots, a checked one and a beating one, are never touched', async (t) => {
  const checked = await create(t, CHECKED_BOT, CHECK);
  const beating = await create(t, BEATING_BOT, { heartbeat: { ttl_s: 5 }, grace_s: GRACE_S });
  t.true(await eventually(async () => (await healthOf(checked)).status === 'healthy' && (await healthOf(beating)).status === 'healthy', 20_000, 200));
  const runs = [await startedAt(checked), await startedAt(beating)];
  // Longer than a ttl and a grace together: a watchdog that misjudged either would have acted.
  await new Promise((resolve) => setTimeout(resolve, (5 + GRACE_S + 3) * 1000));
  t.deepEqual([await startedAt(checked), await startedAt(beating)], runs);
  t.is(events.events.filter((event) => ['unhealthy', 'restarted'].includes(event.event) && [checked, beating].includes(String(event.data.bot_id))).length, 0);
  const metrics = (await call(server, '/metrics')).text;
  t.regex(metrics, /bot_agent_bots_health\{status="healthy"\} [1-9]/);
});

test('a bot may beat only for itself: another bot named is 403, and so is the platform', async (t) => {
  const one = await create(t, CHECKED_BOT, CHECK);
  const other = await create(t, CHECKED_BOT, CHECK);
  const bot = { id: one, container: fixture.docker.getContainer(one) };
  const forOther = await fixture.httpFromBot(bot, target, { method: 'POST', path: '/api/bots/self/heartbeat', headers: { 'X-Bot-ID': other } });
  t.is(forOther.status, 403);
  t.regex(String(forOther.body?.msg), /a bot may manage only itself/);
  t.is(agent.heartbeats.latest(other), undefined, 'no beat was taken for the other bot');
  const own = await fixture.httpFromBot(bot, target, { method: 'POST', path: '/api/bots/self/heartbeat', body: { ttl_s: 60 } });
  t.is(own.status, 200, JSON.stringify(own.body));
  t.like(agent.heartbeats.latest(one), { botId: one, ttlMs: 60_000 });
  const platform = await call(server, '/api/bots/self/heartbeat', { body: {}, headers: { 'X-Bot-ID': one } });
  t.is(platform.status, 403);
  t.regex(String(platform.body?.msg), /only a bot may send its own heartbeat/);
});

test("an image's own labels are input, not the platform's word: a heartbeat ttl and grace of 1 s there order no restart storm", async (t) => {
  // Docker merges an image's LABELs into its containers: this image says heartbeats every second, a grace of one.
  const maker = await fixture.docker.createContainer({ Image: TEST_IMAGE, Cmd: ['true'], Labels: { 'bot-agent-test': fixture.runId } });
  const image = `bot-agent-labelled:${fixture.runId}`;
  await maker.commit({ repo: 'bot-agent-labelled', tag: fixture.runId, changes: 'LABEL bot-agent/heartbeat-ttl-s=1 bot-agent/health-grace-s=1' });
  await maker.remove();
  t.teardown(() => fixture.docker.getImage(image).remove({ force: true }).catch(() => undefined));
  t.like((await fixture.docker.getImage(image).inspect()).Config.Labels, { 'bot-agent/heartbeat-ttl-s': '1', 'bot-agent/health-grace-s': '1' });
  // A bot the platform runs itself from that image, and one the agent's create makes from it.
  const platformMade = await fixture.runBot({ image });
  const created = fixture.newBotId();
  t.teardown(() => fixture.docker.getContainer(created).remove({ force: true }).catch(() => undefined));
  const reply = await call(server, '/api/admin/bots', {
    body: { bot_id: created, user_id: 'user_1', image, template: 'discord', token: 'tok-labels', command: ['sh', '-c', 'sleep 2147483647 & wait'] },
  });
  t.is(reply.status, 201, reply.text);
  t.like((await fixture.docker.getContainer(created).inspect()).Config.Labels, { 'bot-agent/heartbeat-ttl-s': '', 'bot-agent/health-grace-s': '' });
  const bots = [platformMade, { id: created, container: fixture.docker.getContainer(created) }];
  const firstRuns = await Promise.all(bots.map((bot) => fixture.startedAt(bot)));
  // Before, the watchdog restarted such a bot every two seconds or so (17 times in 60 s).
  await new Promise((resolve) => setTimeout(resolve, 8_000));
  t.deepEqual(await Promise.all(bots.map((bot) => fixture.startedAt(bot))), firstRuns, 'a bot was restarted');
  for (const bot of bots) {
    const status = await call(server, `/api/bots/${bot.id}`);
    t.like(status.body?.bot, { health: { status: 'none', check: null } }, status.text);
  }
});
