import test from 'ava';
import { runAgentProcess } from '../helpers/agent-process.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { dropDatabases, freshDatabase } from '../helpers/postgres.js';

// No secret in the agent's log, whatever fails (docs/api.md §5): the agent as operators run it, its every line
// captured (stdout and stderr), through the error paths of the database (a wrong password, no server), of the
// webhook (no receiver) and of callers with a wrong token.
const fixture = new DockerFixture();
const ADMIN_TOKEN = 'admin-Token-7f3a9c0d1e2f3a4b5c6d7e8f9a0b';
const WEBHOOK_SECRET = 'whsec-5b1e77d2';

test.after.always(async () => {
  await fixture.cleanup();
  await dropDatabases();
});

async function fetchFrom(port: number, path: string, init: RequestInit = {}): Promise<number> {
  return (await fetch(`http://127.0.0.1:${port}${path}`, init)).status;
}

test('a wrong database password, a database that is not there, a webhook nobody receives, a wrong token: the log never holds a secret', async (t) => {
  await fixture.ready();
  const good = new URL(await freshDatabase());
  const wrongPassword = new URL(good);
  wrongPassword.password = encodeURIComponent('Wrong/Pass#word-42');
  const noServer = new URL(good);
  noServer.port = '1';
  noServer.password = encodeURIComponent('Gone?Pass-99');
  const bot = await fixture.runBot();
  const secrets = [ADMIN_TOKEN, WEBHOOK_SECRET, decodeURIComponent(good.password), 'Wrong/Pass#word-42', 'Gone?Pass-99'];
  const logs: string[] = [];

  const cases: Array<{ url: URL; until: RegExp }> = [
    { url: good, until: /webhook: delivery of event \d+ failed/ },
    { url: wrongPassword, until: /does not answer/ },
    { url: noServer, until: /does not answer/ },
  ];
  for (const { url, until } of cases) {
    const agent = await runAgentProcess(
      {
        AGENT_DATABASE_URL: url.toString(),
        AGENT_DATA_DIR: ':memory:',
        AGENT_ADMIN_TOKEN: ADMIN_TOKEN,
        AGENT_LOOPBACK_PLATFORM: 'off',
        AGENT_WEBHOOK_URL: 'http://127.0.0.1:1/hook',
        AGENT_WEBHOOK_SECRET: WEBHOOK_SECRET,
      },
      { captureStderr: true },
    );
    t.teardown(() => agent.process.kill('SIGKILL'));
    const owner = JSON.stringify({ bot_id: bot.id, user_id: 'user_1' });
    const json = { 'content-type': 'application/json' };
    t.is(await fetchFrom(agent.port, '/api/bots/stop', { method: 'POST', body: owner, headers: { ...json, authorization: 'Bearer wrong-token' } }), 403);
    t.is(await fetchFrom(agent.port, '/api/bots/start', { method: 'POST', body: owner, headers: { ...json, authorization: `Bearer ${ADMIN_TOKEN}` } }), 200);
    await fetchFrom(agent.port, `/api/bots/${bot.id}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    t.true(await eventually(() => until.test(agent.output()), 20_000, 100), `${url.host}: the log says ${until}`);
    agent.process.kill('SIGTERM');
    await new Promise((resolve) => agent.process.once('exit', resolve));
    logs.push(agent.output());
  }
  const everything = logs.join('\n');
  for (const secret of secrets) {
    for (const form of [secret, encodeURIComponent(secret), JSON.stringify(secret).slice(1, -1)]) {
      t.false(everything.includes(form), `the log holds ${form}`);
    }
  }
});
