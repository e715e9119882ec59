import test from 'ava';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { createDockerProvisioner } from '../../src/runtime/docker/docker-provisioner.js';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { createdIdleBot } from '../helpers/idle-bot.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { dropDatabases, freshDatabase } from '../helpers/postgres.js';

// Two agents over one engine and one PostgreSQL history (docs/api.md §§11, 15): a deploy asked of both at
// once is driven by exactly one; both answer the same revisions.
const fixture = new DockerFixture();
let one: TestAgent;
let other: TestAgent;

test.before(async () => {
  await fixture.ready();
  const databaseUrl = await freshDatabase();
  const network = (await fixture.network()).name;
  const agentOn = () =>
    startAgent(createDockerDriver({ dockerHost: fixture.dockerHost }), { databaseUrl }, '127.0.0.1', createDockerProvisioner({ dockerHost: fixture.dockerHost, network, agentUrl: 'http://agent:8000' }));
  [one, other] = await Promise.all([agentOn(), agentOn()]);
});

test.after.always(async () => {
  await one?.close();
  await other?.close();
  await fixture.cleanup();
  await dropDatabases();
});

test('a deploy asked of two agents at once: one drives it (202), the other answers 409; both list the same revisions; one run', async (t) => {
  const id = await createdIdleBot(t, fixture, one.server);
  const body = { env: { MODE: 'two' }, min_ready_s: 1 };
  const answers = await Promise.all([one, other].map((agent) => call(agent.server, `/api/admin/bots/${id}`, { method: 'PATCH', body })));
  t.deepEqual(answers.map((reply) => reply.status).sort(), [202, 409], answers.map((reply) => reply.text).join('\n'));
  t.regex(String(answers.find((reply) => reply.status === 409)?.body?.msg), /^deploy in progress/);
  const listOf = async (agent: TestAgent) => ((await call(agent.server, `/api/bots/${id}/revisions`)).body?.revisions ?? []) as { revision: number; outcome: string }[];
  t.true(await eventually(async () => (await listOf(one))[0]?.outcome === 'succeeded', 30_000, 200));
  t.deepEqual(await listOf(other), await listOf(one));
  // Revision 1 was still judged when the deploy came (docs/api.md §15).
  t.deepEqual(
    (await listOf(one)).map((r) => [r.revision, r.outcome]),
    [
      [2, 'succeeded'],
      [1, 'interrupted'],
    ],
  );
  const running = await fixture.docker.listContainers({ filters: { label: [`${BOT_LABEL}=${id}`] } });
  t.deepEqual(running.map((c) => c.Names[0]), [`/${id}`]);
});
