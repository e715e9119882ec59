import test from 'ava';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { createDockerProvisioner } from '../../src/runtime/docker/docker-provisioner.js';
import { BOT_LABEL, OWNER_LABEL } from '../../src/runtime/labels.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { DockerFixture, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { dropDatabases, freshDatabase } from '../helpers/postgres.js';
import { PrivateEngine } from '../helpers/private-engine.js';

// Two nodes of one fleet (docs/api.md §17): an agent beside the shared engine and one beside an engine of this
// file's own (its own dockerd in a network namespace of its own), one PostgreSQL between them.
const fixture = new DockerFixture();
const engine = new PrivateEngine('fleet-b');
let databaseUrl: string;
let nodeA: TestAgent;
let nodeB: TestAgent;
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

test.before(async () => {
  await fixture.ready();
  await engine.start();
  await engine.withTestImage(fixture.docker);
  const container = await engine.docker().createContainer({
    name: botB,
    Image: TEST_IMAGE,
    Cmd: ['sh', '-c', "trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done"],
    Labels: { [BOT_LABEL]: botB, [OWNER_LABEL]: 'user_1' },
    HostConfig: { NetworkMode: 'none' },
  });
  await container.start();
  databaseUrl = await freshDatabase();
  nodeA = await startAgent(createDockerDriver({ dockerHost: fixture.dockerHost }), { databaseUrl, node: 'node-a', nodeUrl: 'http://127.0.0.1:1' });
  // A provisioner for its listing alone: its bots have no network.
  const provisioner = createDockerProvisioner({ dockerHost: engine.dockerHost, network: 'none', agentUrl: 'http://agent:8000' });
  nodeB = await startAgent(createDockerDriver({ dockerHost: engine.dockerHost }), { databaseUrl, node: 'node-b' }, '127.0.0.1', provisioner);
});

let nodeBClosed = false;

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
    t.like(nodes['node-b'], { alive: true, bots: 1, running: 1, url: null, self: agent === nodeB });
    t.like(nodes['node-a'], { alive: true, url: 'http://127.0.0.1:1', self: agent === nodeA });
    t.deepEqual(Object.keys(nodes).sort(), ['node-a', 'node-b']);
  }
  t.like((await call(nodeA.server, `/api/bots/${bot.id}`)).body?.bot, { node: 'node-a' });
  t.like((await call(nodeB.server, `/api/bots/${botB}`)).body?.bot, { node: 'node-b' });
  const listed = (await call(nodeB.server, '/api/admin/bots')).body?.bots as { bot_id: string; node: string }[];
  t.deepEqual(listed.map((item) => [item.bot_id, item.node]), [[botB, 'node-b']]);
  // The bot stops on node-b: its node says so within a renewal.
  await engine.docker().getContainer(botB).stop();
  t.true(await eventually(async () => (await nodesAt(nodeA))['node-b']?.running === 0, 20_000, 200), 'node-b still counts it running');
});

test.serial('a node whose agent stopped is listed away, with its bots as they last were', async (t) => {
  nodeBClosed = true;
  await nodeB.close();
  t.true(await eventually(async () => (await nodesAt(nodeA))['node-b']?.alive === false, 30_000, 500), 'node-b still alive');
  t.like((await nodesAt(nodeA))['node-b'], { bots: 1, self: false });
});
