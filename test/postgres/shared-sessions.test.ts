import test from 'ava';
import { startAgent } from '../helpers/agent.js';
import { call } from '../helpers/http-client.js';
import { eventually } from '../helpers/eventually.js';
import { MemoryDriver } from '../helpers/memory-driver.js';
import { dropDatabases, freshDatabase } from '../helpers/postgres.js';

// A console session ended on one agent is ended on every agent sharing its PostgreSQL (docs/api.md §12):
// before, the other agents took the cookie until its 12 hours were over.
const TOKEN = 'console-admin-token-0123456789abcdef0123';

test.after.always(dropDatabases);

test('a session ended on one agent is refused by another agent over the same database within seconds', async (t) => {
  const databaseUrl = await freshDatabase();
  const driver = new MemoryDriver();
  driver.add({ id: 'bot_1_1_shared', ownerId: 'user_1' });
  const config = { databaseUrl, adminToken: TOKEN, loopbackPlatform: false };
  const [one, other] = [await startAgent(driver, config), await startAgent(driver, config)];
  t.teardown(async () => {
    await one.close();
    await other.close();
  });
  const started = await call(one.server, '/api/session', { body: { token: TOKEN } });
  t.is(started.status, 200, started.text);
  const cookie = String([started.headers['set-cookie']].flat()[0]).split(';')[0]!;
  const fleet = (agent: typeof one) => call(agent.server, '/api/console/fleet', { headers: { cookie } });
  t.is((await fleet(other)).status, 200, 'the other agent takes a session it did not start');
  const ended = await call(one.server, '/api/session', { method: 'DELETE', headers: { cookie } });
  t.is(ended.status, 200, ended.text);
  t.is((await fleet(one)).status, 403, 'the agent that ended it still took it');
  const refusedAt = Date.now();
  t.true(await eventually(async () => (await fleet(other)).status === 403, 15_000, 100), 'the other agent still takes the ended session');
  t.log(`the other agent refused it ${Date.now() - refusedAt} ms after it was ended`);
});
