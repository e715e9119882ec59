import test from 'ava';
import { BotTokens } from '../../src/identity/bot-tokens.js';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { createDockerProvisioner } from '../../src/runtime/docker/docker-provisioner.js';
import { asPlatform, startAgent, TEST_ADMIN_TOKEN } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { call } from '../helpers/http-client.js';
import { OwnPostgres } from '../helpers/postgres.js';

// A removal this agent made holds while the shared PostgreSQL is frozen (SIGSTOP: silent, not refusing) for longer
// than any cache of what the database said (docs/api.md §4, rule 8): a token signed before the removal names
// no bot made again under that id, however long the database stays silent. The server is this file's own.
const fixture = new DockerFixture();
const server = new OwnPostgres('removals', 25435);
const tokens = BotTokens.open(':memory:');
let agent: TestAgent;

test.before(async () => {
  await fixture.ready();
  const databaseUrl = await server.freshDatabase(await server.start());
  agent = await startAgent(
    createDockerDriver({ dockerHost: fixture.dockerHost }),
    { databaseUrl, identity: 'token', adminToken: TEST_ADMIN_TOKEN, loopbackPlatform: false, botTokens: tokens },
    '127.0.0.1',
    createDockerProvisioner({ dockerHost: fixture.dockerHost, network: 'none', agentUrl: 'http://agent:8000', tokens }),
  );
});

test.after.always(async () => {
  server.thaw();
  await agent?.close();
  await server.stop().catch(() => undefined);
  await fixture.cleanup();
});

/** A bot run by the fixture, a token bound to its id alone (it would name any bot of that id made without a value of its own), one second older than what comes next. */
async function botWithToken(): Promise<{ id: string; asBot: Record<string, string> }> {
  const bot = await fixture.runBot();
  const asBot = { authorization: `Bot ${tokens.sign(bot.id)}` };
  if ((await call(agent.server, `/api/bots/${bot.id}/stats`, { headers: asBot })).status !== 200) throw new Error('the token does not name its bot');
  // Tokens are signed to the second: this one is of an earlier second than the removal.
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  return { id: bot.id, asBot };
}

/** Removes the bot through the agent, and makes it again under its id without the agent, as a platform's own tooling might. */
async function removedAndMadeAgain(t: import('ava').ExecutionContext, id: string): Promise<void> {
  const removed = await call(agent.server, `/api/admin/bots/${id}`, { method: 'DELETE', headers: asPlatform });
  t.is(removed.status, 200, removed.text);
  await fixture.runBot({ id });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test.serial("a bot removed before the database froze: its token names no bot made again under its id, 10 s into the freeze", async (t) => {
  const { id, asBot } = await botWithToken();
  await removedAndMadeAgain(t, id);
  t.is((await call(agent.server, `/api/bots/${id}/stats`, { headers: asBot })).status, 403);
  server.freeze();
  t.teardown(() => server.thaw());
  // Past every cache of what the database said (5 s).
  await sleep(10_000);
  const late = await call(agent.server, `/api/bots/${id}/stats`, { headers: asBot });
  t.is(late.status, 403, late.text);
  t.regex(String(late.body?.msg), /signed before its bot was removed/);
  server.thaw();
});

test.serial("a bot removed while the database is frozen: its token names no bot made again under its id, 12 s after the removal and once the database answers", async (t) => {
  const { id, asBot } = await botWithToken();
  server.freeze();
  t.teardown(() => server.thaw());
  const removedAt = Date.now();
  await removedAndMadeAgain(t, id);
  while (Date.now() - removedAt < 12_000) await sleep(250);
  const late = await call(agent.server, `/api/bots/${id}/stats`, { headers: asBot });
  t.is(late.status, 403, late.text);
  t.regex(String(late.body?.msg), /signed before its bot was removed/);
  server.thaw();
  const fresh = { authorization: `Bot ${tokens.sign(id)}` };
  t.is((await call(agent.server, `/api/bots/${id}/stats`, { headers: fresh })).status, 200, 'a token signed after the removal names the new bot');
  t.is((await call(agent.server, `/api/bots/${id}/stats`, { headers: asBot })).status, 403, 'and once the database answers again, as before');
});
