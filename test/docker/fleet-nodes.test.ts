import test from 'ava';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { createDockerProvisioner } from '../../src/runtime/docker/docker-provisioner.js';
import { BOT_LABEL, OWNER_LABEL, RESTART_MAX_CRASHES_LABEL, REVISION_LABEL } from '../../src/runtime/labels.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { DockerFixture, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { freePort } from '../helpers/free-port.js';
import { launchChromium, othersRemoved, watchPage } from '../helpers/browser.js';
import { call } from '../helpers/http-client.js';
import { dropDatabases, freshDatabase } from '../helpers/postgres.js';
import { PrivateEngine } from '../helpers/private-engine.js';
import { openStream } from '../helpers/sse-client.js';

// Three nodes of one fleet (docs/api.md §17): an agent beside the shared engine and one beside each of two engines
// of this file's own (each its own dockerd in a network namespace of its own), one PostgreSQL between them, one
// fleet key.
const fixture = new DockerFixture();
const engine = new PrivateEngine('fleet-b');
const engineC = new PrivateEngine('fleet-c');
const FLEET_KEY = 'fleet-key-0123456789abcdef0123456789abcdef';
/** Each bot is restarted, stopped and started through every agent: the lifecycle budget is not this file's subject. */
const RATE_LIMIT = 1_000;
let databaseUrl: string;
let nodeA: TestAgent;
let nodeB: TestAgent;
let portA: number;
let portB: number;
let nodeC: TestAgent;
let portC: number;
let nodeBClosed = false;
const botB = `bot_${process.pid}_1_fleetnodeb`;
const botC = `bot_${process.pid}_3_fleetnodec`;
const ticking = (node: string) => `echo 'hello from ${node}'; trap 'exit 0' TERM; while :; do echo tick; sleep 1 & wait $!; done`;

interface NodeAnswer {
  node: string;
  alive: boolean;
  bots: number;
  running: number;
  self: boolean;
  url: string | null;
}

const nodesAt = async (agent: TestAgent): Promise<Record<string, NodeAnswer>> => {
  const reply = await call(agent.server, '/api/admin/nodes');
  if (reply.status !== 200) throw new Error(`nodes: ${reply.status} ${reply.text}`);
  return Object.fromEntries((reply.body?.nodes as NodeAnswer[]).map((node) => [node.node, node]));
};

/** A node's agent beside its own engine; its bots have no network (the provisioner makes them so). */
function startNodeAgent(on: PrivateEngine, node: string, port: number): Promise<TestAgent> {
  const provisioner = createDockerProvisioner({ dockerHost: on.dockerHost, network: 'none', agentUrl: 'http://agent:8000' });
  return startAgent(
    createDockerDriver({ dockerHost: on.dockerHost }),
    { databaseUrl, node, nodeUrl: `http://127.0.0.1:${port}`, fleetKey: FLEET_KEY, port, rateLimit: RATE_LIMIT },
    '127.0.0.1',
    provisioner,
  );
}

const startNodeB = (): Promise<TestAgent> => startNodeAgent(engine, 'node-b', portB);

test.before(async () => {
  await fixture.ready();
  await Promise.all([engine.start(), engineC.start()]);
  await Promise.all([engine.withTestImage(fixture.docker), engineC.withTestImage(fixture.docker)]);
  await engine.runBot(botB, ticking('node-b'));
  await engineC.runBot(botC, ticking('node-c'));
  databaseUrl = await freshDatabase();
  portA = await freePort();
  portB = await freePort();
  portC = await freePort();
  // Node A is reached by the shared engine's bots too (0.0.0.0), as the agent beside a host's bots is.
  nodeA = await startAgent(
    createDockerDriver({ dockerHost: fixture.dockerHost }),
    { databaseUrl, node: 'node-a', nodeUrl: `http://127.0.0.1:${portA}`, fleetKey: FLEET_KEY, port: portA, rateLimit: RATE_LIMIT },
    '0.0.0.0',
    createDockerProvisioner({ dockerHost: fixture.dockerHost, network: (await fixture.network()).name, agentUrl: 'http://agent:8000' }),
  );
  nodeB = await startNodeB();
  nodeC = await startNodeAgent(engineC, 'node-c', portC);
});

test.after.always(async () => {
  await nodeA?.close();
  if (!nodeBClosed) await nodeB?.close();
  await nodeC?.close();
  await engine.destroy();
  await engineC.destroy();
  await fixture.cleanup();
  await dropDatabases();
});

test.serial("every agent lists every node, alive, each with the bots its engine holds; a bot's status names its node", async (t) => {
  const bot = await fixture.runBot();
  for (const agent of [nodeA, nodeB, nodeC]) {
    const listsAll = async () => {
      const nodes = await nodesAt(agent);
      return nodes['node-b']?.bots === 1 && nodes['node-c']?.bots === 1 && (nodes['node-a']?.bots ?? 0) >= 1;
    };
    t.true(await eventually(listsAll, 20_000, 200), 'the nodes not listed with their bots');
    const nodes = await nodesAt(agent);
    t.deepEqual(Object.keys(nodes).sort(), ['node-a', 'node-b', 'node-c']);
    t.like(nodes['node-b'], { alive: true, bots: 1, running: 1, self: agent === nodeB });
    t.like(nodes['node-c'], { alive: true, bots: 1, running: 1, self: agent === nodeC });
    t.like(nodes['node-a'], { alive: true, url: `http://127.0.0.1:${portA}`, self: agent === nodeA });
  }
  t.like((await call(nodeA.server, `/api/bots/${bot.id}`)).body?.bot, { node: 'node-a' });
  t.like((await call(nodeB.server, `/api/bots/${botB}`)).body?.bot, { node: 'node-b' });
  const listed = (await call(nodeB.server, '/api/admin/bots')).body?.bots as { bot_id: string; node: string }[];
  t.deepEqual(listed.map((item) => [item.bot_id, item.node]), [[botB, 'node-b']]);
});

test.serial("the platform's every seed operation on node-b's bot, through node-a: passed on, answered as node-b answers", async (t) => {
  const viaA = (path: string, init: Parameters<typeof call>[2] = {}) => call(nodeA.server, path, init);
  const status = await viaA(`/api/bots/${botB}`);
  t.is(status.status, 200, status.text);
  t.like(status.body?.bot, { bot_id: botB, node: 'node-b', state: 'running' });
  const logs = await viaA('/api/bots/logs', { body: { bot_id: botB, lines: 500 } });
  t.is(logs.status, 200, logs.text);
  t.regex(String(logs.body?.logs), /hello from node-b/);
  t.is((await viaA(`/api/bots/${botB}/stats`)).status, 200);

  const follow = await openStream(nodeA.server, `/api/bots/${botB}/logs?follow=true&lines=1`);
  t.is(follow.status, 200);
  await follow.next((event) => event.data.line === 'tick');
  follow.close();

  t.is((await viaA('/api/bots/stop', { body: { bot_id: botB, user_id: 'user_1' } })).status, 200);
  t.false((await engine.docker().getContainer(botB).inspect()).State.Running, 'not stopped on node-b');
  t.is((await viaA('/api/bots/start', { body: { bot_id: botB, user_id: 'user_1' } })).status, 200);
  t.true((await engine.docker().getContainer(botB).inspect()).State.Running, 'not started on node-b');
  const before = (await engine.docker().getContainer(botB).inspect()).State.StartedAt;
  t.is((await viaA('/api/bots/restart', { body: { bot_id: botB, user_id: 'user_1' } })).status, 200);
  t.not((await engine.docker().getContainer(botB).inspect()).State.StartedAt, before, 'not restarted on node-b');
  // What node-b's agent recorded, read through node-a: the stop's run end, requested.
  const exits = await viaA(`/api/bots/${botB}/exits`);
  t.is(exits.status, 200, exits.text);
  t.like((exits.body?.exits as unknown[])[0], { requested: true });
  // One stream over the fleet: node-a's carries what node-b's agent kept, each event naming its node.
  for (const path of ['/api/events?after=0', `/api/bots/${botB}/events?after=0`]) {
    const events = await openStream(nodeA.server, path);
    t.is(events.status, 200, path);
    const told = await events.next((event) => event.event === 'operation' && event.data.bot_id === botB && event.data.operation === 'restart', 10_000);
    events.close();
    t.is(told.data.node, 'node-b', path);
  }
});

test.serial("three nodes: every seed operation on every node's bot through every node's agent, the container's real state after each", async (t) => {
  const botA = await fixture.runBot({ script: ticking('node-a') });
  const bots = [
    { id: botA.id, node: 'node-a', docker: fixture.docker },
    { id: botB, node: 'node-b', docker: engine.docker() },
    { id: botC, node: 'node-c', docker: engineC.docker() },
  ];
  const agents = [
    { name: 'node-a', agent: nodeA },
    { name: 'node-b', agent: nodeB },
    { name: 'node-c', agent: nodeC },
  ];
  for (const { name, agent } of agents) {
    for (const bot of bots) {
      const via = `${bot.id} on ${bot.node} via ${name}`;
      const status = async () => call(agent.server, `/api/bots/${bot.id}`);
      // An agent knows another node's bot once that node's agent has said it holds it (every 5 s).
      t.true(await eventually(async () => (await status()).status === 200, 20_000, 250), via);
      t.like((await status()).body?.bot, { bot_id: bot.id, node: bot.node, state: 'running' }, via);
      const logs = await call(agent.server, '/api/bots/logs', { body: { bot_id: bot.id, lines: 1000 } });
      t.regex(String(logs.body?.logs), new RegExp(`hello from ${bot.node}`), via);
      t.is((await call(agent.server, `/api/bots/${bot.id}/stats`)).status, 200, via);
      const inspect = () => bot.docker.getContainer(bot.id).inspect();
      t.is((await call(agent.server, '/api/bots/stop', { body: { bot_id: bot.id, user_id: 'user_1' } })).status, 200, via);
      t.false((await inspect()).State.Running, `not stopped: ${via}`);
      t.is((await call(agent.server, '/api/bots/start', { body: { bot_id: bot.id, user_id: 'user_1' } })).status, 200, via);
      const started = (await inspect()).State;
      t.true(started.Running, `not started: ${via}`);
      t.is((await call(agent.server, '/api/bots/restart', { body: { bot_id: bot.id, user_id: 'user_1' } })).status, 200, via);
      t.not((await inspect()).State.StartedAt, started.StartedAt, `not restarted: ${via}`);
      // The answer names the node that acted when it is another.
      const answered = await status();
      t.is(answered.headers['x-bot-agent-node'], bot.node === name ? undefined : bot.node, via);
    }
  }
});

test.serial("a bot reaches no other node's bot through its own node's agent, and a fleet key it makes up is refused", async (t) => {
  const bot = await fixture.runBot();
  const target = { host: (await fixture.network()).gateway, port: portA };
  const asBot = await fixture.httpFromBot(bot, target, { method: 'GET', path: `/api/bots/${botB}` });
  t.true(asBot.status === 403 || asBot.status === 404, `${asBot.status}`);
  const forged = await fixture.httpFromBot(bot, target, { method: 'GET', path: `/api/bots/${botB}`, headers: { authorization: 'Fleet not-the-fleet-key-0123456789abcdef0123' } });
  t.is(forged.status, 403, forged.raw);
  const platformForged = await call(nodeA.server, `/api/bots/${botB}`, { headers: { authorization: 'Fleet not-the-fleet-key-0123456789abcdef0123' } });
  t.is(platformForged.status, 403, platformForged.text);
  t.regex(String(platformForged.body?.msg), /fleet key is not this fleet's/);
});

test.serial("a create that names node-b, sent to node-a, makes the bot on node-b's engine, whose agent then answers for it through node-a; a node the fleet lacks is 422", async (t) => {
  const id = `bot_${process.pid}_2_fleetmade`;
  const spec = { bot_id: id, user_id: 'user_2', image: TEST_IMAGE, template: 'telegram', token: 'tok-fleet', command: ['sleep', '1000'] };
  const unknown = await call(nodeA.server, '/api/admin/bots', { body: { ...spec, node: 'node-z' } });
  t.is(unknown.status, 422, unknown.text);
  t.regex(String(unknown.body?.msg), /this agent is node node-a, and node node-z is not one/);
  const made = await call(nodeA.server, '/api/admin/bots', { body: { ...spec, node: 'node-b' } });
  t.is(made.status, 201, made.text);
  const onB = await engine.docker().listContainers({ filters: { label: [`${BOT_LABEL}=${id}`] } });
  t.is(onB.length, 1, 'not running on node-b');
  t.is((await fixture.docker.listContainers({ all: true, filters: { label: [`${BOT_LABEL}=${id}`] } })).length, 0, 'made on node-a too');
  // Once node-b's agent has said it holds the bot, node-a passes its calls on.
  const status = async () => call(nodeA.server, `/api/bots/${id}`);
  t.true(await eventually(async () => (await status()).status === 200, 20_000, 250), 'node-a never answered for the new bot');
  t.like((await status()).body?.bot, { bot_id: id, node: 'node-b', state: 'running' });
  const removed = await call(nodeA.server, `/api/admin/bots/${id}`, { method: 'DELETE' });
  t.is(removed.status, 200, removed.text);
  t.is((await engine.docker().listContainers({ all: true, filters: { label: [`${BOT_LABEL}=${id}`] } })).length, 0, 'not removed from node-b');
  t.true(await eventually(async () => (await nodesAt(nodeA))['node-b']?.bots === 1, 20_000, 250), "the removed bot still counted among node-b's");
  t.is((await call(nodeA.server, `/api/bots/${id}`)).status, 404);
});

test.serial("a bot moved from node-b to node-c by a call to node-a: the same id, owner, token, variables, limits and history, running on node-c's engine, gone from node-b's", async (t) => {
  const id = `bot_${process.pid}_4_fleetmove`;
  const spec = {
    bot_id: id,
    user_id: 'user_4',
    image: TEST_IMAGE,
    template: 'discord',
    token: 'tok-move-1',
    env: { GREETING: 'hi there' },
    memory_limit: 64 * 1024 * 1024,
    restart_policy: { max_crashes: 5, window_s: 600 },
    command: ['sh', '-c', 'echo "hello $GREETING from $BOT_ID"; trap "exit 0" TERM; while :; do sleep 1 & wait $!; done'],
    node: 'node-b',
  };
  const made = await call(nodeA.server, '/api/admin/bots', { body: spec });
  t.is(made.status, 201, made.text);
  const status = () => call(nodeA.server, `/api/bots/${id}`);
  t.true(await eventually(async () => (await status()).body?.bot !== undefined, 20_000, 250), 'node-a never answered for the new bot');
  // A run on node-b that ended and was recorded: its history moves with it.
  t.is((await call(nodeA.server, '/api/bots/restart', { body: { bot_id: id, user_id: 'user_4' } })).status, 200);
  const exits = async () => ((await call(nodeA.server, `/api/bots/${id}/exits`)).body?.exits as { requested: boolean }[] | undefined) ?? [];
  t.true(await eventually(async () => (await exits()).length === 1, 20_000, 250), "the restart's run end was not recorded");

  // A schedule of the bot's, made before the move (docs/api.md §18): it moves with the bot.
  const scheduled = await call(nodeA.server, `/api/admin/bots/${id}/schedules`, {
    body: { name: 'moves-along', cron: '0 0 1 1 *', actions: [{ type: 'command', command: ['sh', '-c', 'echo "ran on $(hostname)" > /tmp/scheduled'] }] },
  });
  t.is(scheduled.status, 201, scheduled.text);
  const scheduleId = (scheduled.body?.schedule as { id: string }).id;

  const elsewhere = await call(nodeA.server, `/api/admin/bots/${id}/move`, { body: { node: 'node-z' } });
  t.is(elsewhere.status, 422, elsewhere.text);
  t.regex(String(elsewhere.body?.msg), /node node-z is not one of the fleet's/);
  const already = await call(nodeA.server, `/api/admin/bots/${id}/move`, { body: { node: 'node-b' } });
  t.is(already.status, 409, already.text);
  t.regex(String(already.body?.msg), /is on node node-b already/);
  const notAgents = await call(nodeC.server, '/api/fleet/bots', { body: { ...spec, node: undefined, bot_id: `${id}x`, revision: 1 } });
  t.is(notAgents.status, 403, notAgents.text);
  const notAgentsData = await call(nodeC.server, `/api/fleet/bots/${id}/data`, { body: { from: 'node-b', backup_id: 'bak_20261203T000000Z_00000000' } });
  t.is(notAgentsData.status, 403, notAgentsData.text);

  const moved = await call(nodeA.server, `/api/admin/bots/${id}/move`, { body: { node: 'node-c' } });
  t.is(moved.status, 200, moved.text);
  t.like(moved.body, { ok: true, node: 'node-c' });
  t.is((await engine.docker().listContainers({ all: true, filters: { label: [`${BOT_LABEL}=${id}`] } })).length, 0, 'still on node-b');
  const onC = await engineC.docker().getContainer(id).inspect();
  t.true(onC.State.Running, 'not running on node-c');
  t.like(onC.Config.Labels, { [OWNER_LABEL]: 'user_4', [REVISION_LABEL]: '1', [RESTART_MAX_CRASHES_LABEL]: '5' });
  const env = new Set(onC.Config.Env);
  for (const entry of ['BOT_TOKEN=tok-move-1', 'DISCORD_TOKEN=tok-move-1', 'GREETING=hi there', `BOT_ID=${id}`, 'USER_ID=user_4', 'TEMPLATE=discord']) t.true(env.has(entry), entry);
  t.is(onC.HostConfig.Memory, 64 * 1024 * 1024);
  // Answered once the fleet's table names node-c: every agent finds it there at once.
  for (const agent of [nodeA, nodeB, nodeC]) t.like((await call(agent.server, `/api/bots/${id}`)).body?.bot, { bot_id: id, node: 'node-c', state: 'running' });
  const logs = async () => String((await call(nodeA.server, '/api/bots/logs', { body: { bot_id: id, lines: 10 } })).body?.logs);
  t.true(await eventually(async () => (await logs()).includes(`hello hi there from ${id}`), 10_000, 250), 'its run on node-c did not begin');
  // Its history: the run on node-b, then the move's stop.
  t.true(await eventually(async () => (await exits()).length === 2, 20_000, 250), 'the history before the move is not the bot\'s');
  const events = await openStream(nodeA.server, `/api/bots/${id}/events?after=0`);
  const told = await events.next((event) => event.event === 'moved', 10_000);
  events.close();
  t.like(told.data, { bot_id: id, from_node: 'node-b', to_node: 'node-c', by: 'platform', node: 'node-b' });
  // Its schedule moved with it: listed at node-c's agent, and run now (asked of node-a) in its run on node-c.
  t.deepEqual(((await call(nodeC.server, `/api/admin/bots/${id}/schedules`)).body?.schedules as { id: string }[]).map((one) => one.id), [scheduleId]);
  const ranNow = await call(nodeA.server, `/api/admin/bots/${id}/schedules/${scheduleId}/run`, { method: 'POST' });
  t.is(ranNow.status, 202, ranNow.text);
  const runState = async () => ((await call(nodeA.server, `/api/bots/${id}/schedules/${scheduleId}/runs`)).body?.runs as { state: string }[])[0]?.state;
  t.true(await eventually(async () => (await runState()) === 'succeeded', 20_000, 250), String(await runState()));
  const file = await engineC.docker().getContainer(id).exec({ Cmd: ['cat', '/tmp/scheduled'], AttachStdout: true });
  const stream = await file.start({});
  let said = '';
  stream.on('data', (chunk: Buffer) => (said += chunk.toString('latin1')));
  await new Promise((resolve) => stream.on('end', resolve));
  t.regex(said, /ran on /, 'the schedule ran in the bot on node-c');
  t.is((await call(nodeA.server, `/api/admin/bots/${id}`, { method: 'DELETE' })).status, 200);
});

test.serial("a move the other node refuses (an image only this node has): its words, and the bot runs on where it was", async (t) => {
  const id = `bot_${process.pid}_5_fleetstays`;
  const image = '127.0.0.1:1/only-on-c:1';
  await engineC.docker().getImage(TEST_IMAGE).tag({ repo: '127.0.0.1:1/only-on-c', tag: '1' });
  const made = await call(nodeA.server, '/api/admin/bots', {
    body: { bot_id: id, user_id: 'user_5', image, template: 'telegram', token: 'tok-stays', command: ['sh', '-c', 'trap "exit 0" TERM; while :; do sleep 1 & wait $!; done'], node: 'node-c' },
  });
  t.is(made.status, 201, made.text);
  t.true(await eventually(async () => (await call(nodeA.server, `/api/bots/${id}`)).status === 200, 20_000, 250));
  const before = (await engineC.docker().getContainer(id).inspect()).State.StartedAt;
  const refused = await call(nodeA.server, `/api/admin/bots/${id}/move`, { body: { node: 'node-b' } });
  t.true(refused.status >= 400 && refused.status !== 500, refused.text);
  t.regex(String(refused.body?.msg), new RegExp(`bot ${id} was not moved to node node-b, which said: .+; it stays on node node-c`));
  const onC = await engineC.docker().getContainer(id).inspect();
  t.true(onC.State.Running, 'not running again on node-c');
  t.not(onC.State.StartedAt, before, 'it was not stopped for the move');
  t.is((await engine.docker().listContainers({ all: true, filters: { label: [`${BOT_LABEL}=${id}`] } })).length, 0, 'left on node-b');
  t.like((await call(nodeA.server, `/api/bots/${id}`)).body?.bot, { node: 'node-c', state: 'running' });
  t.is((await call(nodeA.server, `/api/admin/bots/${id}`, { method: 'DELETE' })).status, 200);
});

test.serial("a bot that keeps data is not moved by an agent that keeps no backups: 422 before anything stops, and it runs on where it was", async (t) => {
  const id = `bot_${process.pid}_6_fleetdata`;
  const made = await call(nodeA.server, '/api/admin/bots', {
    body: { bot_id: id, user_id: 'user_6', image: TEST_IMAGE, template: 'n8n', token: 'tok-data', command: ['sh', '-c', 'trap "exit 0" TERM; while :; do sleep 1 & wait $!; done'], node: 'node-c', data: [{ path: '/data' }] },
  });
  t.is(made.status, 201, made.text);
  t.true(await eventually(async () => (await call(nodeA.server, `/api/bots/${id}`)).status === 200, 20_000, 250));
  const before = (await engineC.docker().getContainer(id).inspect()).State.StartedAt;
  const refused = await call(nodeA.server, `/api/admin/bots/${id}/move`, { body: { node: 'node-b' } });
  t.is(refused.status, 422, refused.text);
  t.is(refused.body?.msg, `bot ${id} keeps data, and this agent keeps no backups to carry it in (AGENT_DATA_DIR=:memory:): it stays on node node-c (docs/api.md §19)`);
  const onC = await engineC.docker().getContainer(id).inspect();
  t.true(onC.State.Running);
  t.is(onC.State.StartedAt, before, 'never stopped');
  t.is((await engine.docker().listContainers({ all: true, filters: { label: [`${BOT_LABEL}=${id}`] } })).length, 0, 'nothing made on node-b');
  t.is((await call(nodeA.server, `/api/admin/bots/${id}`, { method: 'DELETE' })).status, 200);
});

test.serial("node-c drained to node-a by a call to node-b: the bot an agent made moved, one it did not refused, each outcome said; drained with nowhere to go, its bots are stopped", async (t) => {
  const id = `bot_${process.pid}_6_fleetdrained`;
  const made = await call(nodeA.server, '/api/admin/bots', {
    body: { bot_id: id, user_id: 'user_6', image: TEST_IMAGE, template: 'telegram', token: 'tok-drained', command: ['sh', '-c', 'trap "exit 0" TERM; while :; do sleep 1 & wait $!; done'], node: 'node-c' },
  });
  t.is(made.status, 201, made.text);
  const byId = (bots: unknown) => [...((bots as { bot_id: string }[] | undefined) ?? [])].sort((a, b) => (a.bot_id < b.bot_id ? -1 : 1));
  const drained = await call(nodeB.server, '/api/admin/nodes/node-c/drain', { body: { to: 'node-a' } });
  t.is(drained.status, 200, drained.text);
  t.like(drained.body, { ok: true, node: 'node-c' });
  t.is(drained.headers['x-bot-agent-node'], 'node-c');
  t.deepEqual(byId(drained.body?.bots), [
    { bot_id: botC, outcome: 'failed', msg: `bot ${botC} carries no owner or template label: only a bot an agent made can be moved` },
    { bot_id: id, outcome: 'moved' },
  ]);
  t.true((await fixture.docker.getContainer(id).inspect()).State.Running, 'not running on node-a');
  t.is((await engineC.docker().listContainers({ all: true, filters: { label: [`${BOT_LABEL}=${id}`] } })).length, 0, 'left on node-c');
  t.like((await call(nodeB.server, `/api/bots/${id}`)).body?.bot, { bot_id: id, node: 'node-a', state: 'running' });
  t.true((await engineC.docker().getContainer(botC).inspect()).State.Running, 'the bot that could not move does not run on');

  const stopped = await call(nodeA.server, '/api/admin/nodes/node-c/drain', { body: {} });
  t.is(stopped.status, 200, stopped.text);
  t.deepEqual(stopped.body?.bots, [{ bot_id: botC, outcome: 'stopped' }]);
  t.false((await engineC.docker().getContainer(botC).inspect()).State.Running, 'still running on node-c');

  const itself = await call(nodeA.server, '/api/admin/nodes/node-a/drain', { body: { to: 'node-a' } });
  t.is(itself.status, 422, itself.text);
  const unknown = await call(nodeA.server, '/api/admin/nodes/node-z/drain', { body: {} });
  t.is(unknown.status, 404, unknown.text);
  t.regex(String(unknown.body?.msg), /node node-z is not one of the fleet's/);
  t.is((await call(nodeA.server, `/api/admin/bots/${id}`, { method: 'DELETE' })).status, 200);
});

test.serial("node-a's console in Chromium: node-b's bot in the one table, with its node and a filter by node; its page follows its live logs through node-a", async (t) => {
  const browser = await launchChromium();
  t.teardown(() => browser.close());
  const page = await browser.newPage();
  // node-a's engine is the one other test files share: their bots come and go in its table.
  const problems = watchPage(page, { expected: othersRemoved(fixture.runId, 'fleetnodeb', 'fleetnodec') });
  await page.goto(`http://127.0.0.1:${portA}/`);
  const row = page.locator(`tr[data-bot="${botB}"]`);
  await row.waitFor({ timeout: 20_000 });
  t.regex(await row.innerText(), /node-b/);
  await page.getByRole('combobox', { name: /^Node/ }).selectOption('node-b');
  t.is(await page.locator('tr[data-bot]').count(), 1, 'the filter by node-b kept other rows');
  await row.getByRole('link', { name: botB }).click();
  const log = page.getByTestId('log');
  await log.getByText('hello from node-b').first().waitFor({ timeout: 10_000 });
  const ticks = async () => (await log.innerText()).split('\n').filter((line) => line.includes('tick')).length;
  const before = await ticks();
  t.true(await eventually(async () => (await ticks()) > before, 10_000, 200), 'no new line of the bot on node-b reached the page');
  t.deepEqual(problems, []);
});

test.serial('a node whose agent stopped: calls for its bots are 503 at once naming it; it is listed away, with its bots as they last were', async (t) => {
  nodeBClosed = true;
  await nodeB.close();
  const began = Date.now();
  const meanwhile = await call(nodeA.server, `/api/bots/${botB}`);
  t.is(meanwhile.status, 503, meanwhile.text);
  t.regex(String(meanwhile.body?.msg), /node node-b does not answer/);
  t.true(Date.now() - began < 1_000, `answered in ${Date.now() - began} ms`);
  t.true(await eventually(async () => (await nodesAt(nodeA))['node-b']?.alive === false, 30_000, 500), 'node-b still alive');
  t.like((await nodesAt(nodeA))['node-b'], { bots: 1, self: false });
  // node-a's console table keeps node-b's bot as node-b's agent last said, marked so.
  const table = await call(nodeA.server, '/api/console/fleet');
  t.is(table.status, 200, table.text);
  const lastKnown = (table.body?.bots as { bot_id: string; last_known?: string }[]).find((bot) => bot.bot_id === botB);
  t.like(lastKnown, { node: 'node-b', state: 'running', user_id: null });
  t.true(Date.parse(String(lastKnown?.last_known)) > began - 60_000, 'not marked last known');
  const browser = await launchChromium();
  t.teardown(() => browser.close());
  const page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${portA}/`);
  const row = page.locator(`tr.last-known[data-bot="${botB}"]`);
  // A machine busy with other test files draws the page's first table slowly.
  await row.waitFor({ timeout: 60_000 });
  t.regex(await row.innerText(), /last known/);
  t.regex(await page.getByLabel('Nodes away').innerText(), /node node-b since .*: its 1 bots are shown as last known/);
  await browser.close();
  const away = await call(nodeA.server, '/api/bots/stop', { body: { bot_id: botB, user_id: 'user_1' } });
  t.is(away.status, 503, away.text);
  t.regex(String(away.body?.msg), /node node-b does not answer \(last seen/);

  // Meanwhile the bot's run ends on node-b, with no agent beside it; back, node-b's agent records it once.
  const run = (await engine.docker().getContainer(botB).inspect()).State.StartedAt;
  await engine.docker().getContainer(botB).stop({ t: 1 });
  nodeB = await startNodeB();
  nodeBClosed = false;
  const exitsOfRun = async () => {
    const reply = await call(nodeA.server, `/api/bots/${botB}/exits`);
    return reply.status === 200 ? (reply.body?.exits as { started_at: string | null }[]).filter((exit) => exit.started_at !== null && Date.parse(exit.started_at) === Date.parse(run)) : [];
  };
  t.true(await eventually(async () => (await exitsOfRun()).length > 0, 30_000, 250), 'the run that ended meanwhile was not recorded');
  t.true(await eventually(async () => (await nodesAt(nodeA))['node-b']?.alive === true, 20_000, 250), 'node-b not alive again');
  const status = await call(nodeA.server, `/api/bots/${botB}`);
  t.is(status.status, 200, status.text);
  t.like(status.body?.bot, { node: 'node-b' });
  t.not((status.body?.bot as { state: string }).state, 'running');
  t.is((await exitsOfRun()).length, 1, 'recorded more than once');
});
