import test from 'ava';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { createDockerProvisioner } from '../../src/runtime/docker/docker-provisioner.js';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { DockerFixture, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { freePort } from '../helpers/free-port.js';
import { launchChromium, watchPage } from '../helpers/browser.js';
import { call } from '../helpers/http-client.js';
import { dropDatabases, freshDatabase } from '../helpers/postgres.js';
import { PrivateEngine } from '../helpers/private-engine.js';
import { openStream } from '../helpers/sse-client.js';

// Two nodes of one fleet (docs/api.md §17): an agent beside the shared engine and one beside an engine of this
// file's own (its own dockerd in a network namespace of its own), one PostgreSQL between them, one fleet key.
const fixture = new DockerFixture();
const engine = new PrivateEngine('fleet-b');
const FLEET_KEY = 'fleet-key-0123456789abcdef0123456789abcdef';
let databaseUrl: string;
let nodeA: TestAgent;
let nodeB: TestAgent;
let portA: number;
let portB: number;
let nodeBClosed = false;
const botB = `bot_${process.pid}_1_fleetnodeb`;

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

/** Node B's agent, beside its own engine; its bots have no network (the provisioner makes them so). */
function startNodeB(): Promise<TestAgent> {
  const provisioner = createDockerProvisioner({ dockerHost: engine.dockerHost, network: 'none', agentUrl: 'http://agent:8000' });
  return startAgent(
    createDockerDriver({ dockerHost: engine.dockerHost }),
    { databaseUrl, node: 'node-b', nodeUrl: `http://127.0.0.1:${portB}`, fleetKey: FLEET_KEY, port: portB },
    '127.0.0.1',
    provisioner,
  );
}

test.before(async () => {
  await fixture.ready();
  await engine.start();
  await engine.withTestImage(fixture.docker);
  await engine.runBot(botB, "echo 'hello from node-b'; trap 'exit 0' TERM; while :; do echo tick; sleep 1 & wait $!; done");
  databaseUrl = await freshDatabase();
  portA = await freePort();
  portB = await freePort();
  // Node A is reached by the shared engine's bots too (0.0.0.0), as the agent beside a host's bots is.
  nodeA = await startAgent(
    createDockerDriver({ dockerHost: fixture.dockerHost }),
    { databaseUrl, node: 'node-a', nodeUrl: `http://127.0.0.1:${portA}`, fleetKey: FLEET_KEY, port: portA },
    '0.0.0.0',
    createDockerProvisioner({ dockerHost: fixture.dockerHost, network: (await fixture.network()).name, agentUrl: 'http://agent:8000' }),
  );
  nodeB = await startNodeB();
});

test.after.always(async () => {
  await nodeA?.close();
  if (!nodeBClosed) await nodeB?.close();
  await engine.destroy();
  await fixture.cleanup();
  await dropDatabases();
});

test.serial("either agent lists both nodes, alive, each with the bots its engine holds; a bot's status names its node", async (t) => {
  const bot = await fixture.runBot();
  for (const agent of [nodeA, nodeB]) {
    const listsBoth = async () => {
      const nodes = await nodesAt(agent);
      return nodes['node-b']?.bots === 1 && (nodes['node-a']?.bots ?? 0) >= 1;
    };
    t.true(await eventually(listsBoth, 20_000, 200), 'both nodes not listed with their bots');
    const nodes = await nodesAt(agent);
    t.deepEqual(Object.keys(nodes).sort(), ['node-a', 'node-b']);
    t.like(nodes['node-b'], { alive: true, bots: 1, running: 1, self: agent === nodeB });
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

test.serial("node-a's console in Chromium: node-b's bot in the one table, with its node and a filter by node; its page follows its live logs through node-a", async (t) => {
  const browser = await launchChromium();
  t.teardown(() => browser.close());
  const page = await browser.newPage();
  const problems = watchPage(page);
  await page.goto(`http://127.0.0.1:${portA}/`);
  const row = page.locator(`tr[data-bot="${botB}"]`);
  await row.waitFor({ timeout: 20_000 });
  t.regex(await row.innerText(), /node-b/);
  await page.getByLabel('Node').selectOption('node-b');
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
