import type { AddressInfo } from 'node:net';
import test from 'ava';
import { asPlatform } from '../helpers/agent.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { provisioningAgent } from '../helpers/provisioning-agent.js';
import { CRASH_CODE, PYTEST_SCRIPT, PYTHON_BOT_SCRIPT, pythonBotImage, pytestSummary } from '../helpers/python-bot.js';

// The Python client (clients/python) from inside a real bot container on the real engine: pytest runs in
// a bot the agent created, which names itself by its address and its token (address+token).
const fixture = new DockerFixture();

test.before(() => fixture.ready());
test.after.always(() => fixture.cleanup());

test('the Python client, run by pytest inside a bot container, does everything it offers against the real agent', async (t) => {
  const image = await pythonBotImage();
  const network = await fixture.network();
  const agent = await provisioningAgent(fixture, 'address+token');
  const { server } = agent;
  const id = fixture.newBotId();
  const container = fixture.docker.getContainer(id);
  t.teardown(async () => {
    await container.remove({ force: true }).catch(() => undefined);
    await agent.close();
  });
  const created = await call(server, '/api/admin/bots', {
    headers: asPlatform,
    body: { bot_id: id, user_id: 'user_py', image, template: 'discord', token: 'discord-secret-0123456789', command: ['sh', '-c', PYTHON_BOT_SCRIPT] },
  });
  t.is(created.status, 201, created.text);
  const bot = { id, container };
  t.true(await eventually(() => fixture.running(bot), 30_000, 100), 'the bot never ran');

  // A crash first: the tests find its exit record and its event.
  const firstRun = await fixture.startedAt(bot);
  await fixture.exec(bot, 'kill -USR1 1');
  t.true(await eventually(async () => (await fixture.running(bot)) && (await fixture.startedAt(bot)) !== firstRun, 30_000, 100), 'the crash was not restarted');

  const { port } = server.address() as AddressInfo;
  const secondRun = await fixture.startedAt(bot);
  const output = await fixture.exec(bot, PYTEST_SCRIPT, { BOT_AGENT_PROBE: `${network.gateway}:${port}`, BOT_AGENT_TEST_EXIT_CODE: CRASH_CODE });
  const summary = pytestSummary(output);
  console.log(`pytest inside a bot container (Docker):\n${output.trim().split('\n').slice(-25).join('\n')}`);
  t.true(summary.clean, output);
  t.true(summary.passed >= 19, summary.line);
  // Its last test restarted the bot from inside.
  t.true(await eventually(async () => (await fixture.running(bot)) && (await fixture.startedAt(bot)) !== secondRun, 30_000, 100), 'the restart never happened');
});
