import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { BotTokens } from '../../src/identity/bot-tokens.js';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { createDockerProvisioner } from '../../src/runtime/docker/docker-provisioner.js';
import { asPlatform, startAgent, TEST_ADMIN_TOKEN } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { DockerFixture, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { MemoryDriver } from '../helpers/memory-driver.js';
import { OwnPostgres } from '../helpers/postgres.js';

// What the platform asks for while the history's PostgreSQL is frozen (SIGSTOP: nothing answers, nothing refuses):
// a bot's removal and a console session's end are kept in full, in the spool, and reach the database once it answers
// (docs/api.md §11). Before, the removal answered 500 with the bot half forgotten, and the session's end was dropped.
// The server is this file's own (scripts/postgres.sh, its own folder and port).
const fixture = new DockerFixture();
const server = new OwnPostgres('outage-writes', 25434);
const tokens = BotTokens.open(':memory:');
const ADMIN = 'outage-admin-token-0123456789abcdef01234';
let serverUrl: string;
const agents: TestAgent[] = [];

test.before(async () => {
  await fixture.ready();
  serverUrl = await server.start();
});

test.after.always(async () => {
  server.thaw();
  for (const agent of agents) await agent.close();
  await server.stop().catch(() => undefined);
  await fixture.cleanup();
});

async function dockerAgent(): Promise<TestAgent> {
  const databaseUrl = await server.freshDatabase(serverUrl);
  const provisioner = createDockerProvisioner({ dockerHost: fixture.dockerHost, network: (await fixture.network()).name, agentUrl: 'http://agent:8000', tokens });
  const dataDir = mkdtempSync(join(tmpdir(), 'bot-agent-outage-writes-'));
  const agent = await startAgent(createDockerDriver({ dockerHost: fixture.dockerHost }), { databaseUrl, dataDir, identity: 'token', botTokens: tokens, adminToken: TEST_ADMIN_TOKEN }, '127.0.0.1', provisioner);
  agents.push(agent);
  return agent;
}

const tokenOf = async (id: string): Promise<string> =>
  ((await fixture.docker.getContainer(id).inspect()).Config.Env ?? []).find((entry) => entry.startsWith('PLATFORM_AGENT_TOKEN='))?.split('=')[1] ?? '';

/** Creates the bot, restarts it once through the agent (a record and events to forget), and answers its token. */
async function botWithHistory(agent: TestAgent, id: string): Promise<string> {
  const created = await call(agent.server, '/api/admin/bots', {
    headers: asPlatform,
    body: { bot_id: id, user_id: 'user_1', image: TEST_IMAGE, template: 'discord', token: 'discord-secret-0123456789', command: ['sleep', '1000'] },
  });
  if (created.status !== 201) throw new Error(created.text);
  if ((await call(agent.server, '/api/bots/restart', { headers: asPlatform, body: { bot_id: id, user_id: 'user_1' } })).status !== 200) throw new Error('restart');
  if (!(await eventually(async () => (await call(agent.server, `/api/bots/${id}`, { headers: asPlatform })).body?.bot !== undefined && (await lastExit(agent, id)) !== null))) {
    throw new Error('the restart left no record');
  }
  // Tokens are signed to the second: one signed in the second of the removal still names the bot.
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  return tokenOf(id);
}

async function lastExit(agent: TestAgent, id: string): Promise<unknown> {
  return ((await call(agent.server, `/api/bots/${id}`, { headers: asPlatform })).body?.bot as { last_exit?: unknown } | undefined)?.last_exit;
}

/** The bot's status as a caller presenting `token` through a sidecar's hop gets it. */
const asHolder = (agent: TestAgent, id: string, token: string) => call(agent.server, `/api/bots/${id}/stats`, { headers: { authorization: `Bot ${token}` }, from: '127.0.0.6' });

test.serial('a bot removed while the database is frozen is removed in full: 200, and once it answers the bot made again under its id has no records and the old token names nothing', async (t) => {
  const agent = await dockerAgent();
  const id = fixture.newBotId();
  const oldToken = await botWithHistory(agent, id);
  server.freeze();
  let removed;
  try {
    removed = await call(agent.server, `/api/admin/bots/${id}`, { method: 'DELETE', headers: asPlatform });
  } finally {
    server.thaw();
  }
  t.is(removed.status, 200, removed.text);
  await t.throwsAsync(fixture.docker.getContainer(id).inspect(), undefined, 'the container is still there');
  const again = await call(agent.server, '/api/admin/bots', {
    headers: asPlatform,
    body: { bot_id: id, user_id: 'user_1', image: TEST_IMAGE, template: 'discord', token: 'discord-secret-0123456789', command: ['sleep', '1000'] },
  });
  t.is(again.status, 201, again.text);
  const newToken = await tokenOf(id);
  const refused = await asHolder(agent, id, oldToken);
  t.is(refused.status, 403, refused.text);
  // Refused by the runtime's word (the new bot's generation), or, while its index has not yet seen the old bot go, by the removal.
  t.regex(String(refused.body?.msg), /^forbidden: the bot token (belongs to an earlier bot of this id, since removed|was signed before its bot was removed)$/);
  t.is((await asHolder(agent, id, newToken)).status, 200);
  t.true(await eventually(async () => (await lastExit(agent, id)) === null, 15_000, 200), "the removed bot's record stayed with the new bot");
});

test.serial('a DELETE of a bot whose container is already gone still forgets it: 404, and the bot made again under its id starts with nothing', async (t) => {
  const agent = await dockerAgent();
  const id = fixture.newBotId();
  const oldToken = await botWithHistory(agent, id);
  await fixture.docker.getContainer(id).remove({ force: true });
  const removed = await call(agent.server, `/api/admin/bots/${id}`, { method: 'DELETE', headers: asPlatform });
  t.is(removed.status, 404, removed.text);
  t.is((await call(agent.server, '/api/admin/bots', {
    headers: asPlatform,
    body: { bot_id: id, user_id: 'user_1', image: TEST_IMAGE, template: 'discord', token: 'discord-secret-0123456789', command: ['sleep', '1000'] },
  })).status, 201);
  t.is(await lastExit(agent, id), null);
  t.is((await asHolder(agent, id, oldToken)).status, 403);
});

test.serial('a console session ended while the database is frozen is refused by the other agent once it answers', async (t) => {
  const databaseUrl = await server.freshDatabase(serverUrl);
  const driver = new MemoryDriver();
  const config = { databaseUrl, adminToken: ADMIN, loopbackPlatform: false };
  const one = await startAgent(driver, { ...config, dataDir: mkdtempSync(join(tmpdir(), 'bot-agent-outage-one-')) });
  const other = await startAgent(driver, { ...config, dataDir: mkdtempSync(join(tmpdir(), 'bot-agent-outage-other-')) });
  agents.push(one, other);
  const started = await call(one.server, '/api/session', { body: { token: ADMIN } });
  t.is(started.status, 200, started.text);
  const cookie = String([started.headers['set-cookie']].flat()[0]).split(';')[0]!;
  const fleet = (agent: TestAgent) => call(agent.server, '/api/console/fleet', { headers: { cookie } });
  t.is((await fleet(other)).status, 200);
  server.freeze();
  let ended;
  try {
    ended = await call(one.server, '/api/session', { method: 'DELETE', headers: { cookie } });
  } finally {
    server.thaw();
  }
  t.is(ended.status, 200, ended.text);
  const thawedAt = Date.now();
  t.true(await eventually(async () => (await fleet(other)).status === 403, 15_000, 200), 'the other agent still takes the ended session');
  t.log(`the other agent refused it ${Date.now() - thawedAt} ms after the database answered`);
});

test.serial('/metrics answers at once while the database is frozen, and a flood of scrapes is not a flood of counts', async (t) => {
  const databaseUrl = await server.freshDatabase(serverUrl);
  const agent = await startAgent(new MemoryDriver(), { databaseUrl, dataDir: mkdtempSync(join(tmpdir(), 'bot-agent-outage-metrics-')) });
  agents.push(agent);
  const first = await call(agent.server, '/metrics');
  t.regex(first.text, /^bot_agent_crash_looping_bots 0$/m);
  server.freeze();
  const timings: number[] = [];
  try {
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        const started = performance.now();
        const scraped = await call(agent.server, '/metrics');
        timings.push(performance.now() - started);
        t.is(scraped.status, 200);
        t.regex(scraped.text, /^bot_agent_crash_looping_bots 0$/m);
      }),
    );
  } finally {
    server.thaw();
  }
  // Before, each scrape waited on its own COUNT for the statement's 5 s timeout.
  t.true(Math.max(...timings) < 1_000, `the slowest scrape took ${Math.round(Math.max(...timings))} ms`);
});

test.serial("a removed bot's token names nobody while the database is frozen, past every cache, on the agent that removed it; the new bot's own calls go on", async (t) => {
  const agent = await dockerAgent();
  const id = fixture.newBotId();
  const oldToken = await botWithHistory(agent, id);
  t.is((await call(agent.server, `/api/admin/bots/${id}`, { method: 'DELETE', headers: asPlatform })).status, 200);
  const again = await call(agent.server, '/api/admin/bots', {
    headers: asPlatform,
    body: { bot_id: id, user_id: 'user_1', image: TEST_IMAGE, template: 'discord', token: 'discord-secret-0123456789', command: ['sleep', '1000'] },
  });
  t.is(again.status, 201, again.text);
  const newToken = await tokenOf(id);
  server.freeze();
  try {
    // Past the 5 s for which removals read from the database are kept.
    await new Promise((resolve) => setTimeout(resolve, 7_000));
    const stale = await call(agent.server, `/api/bots/${id}/logs?lines=5`, { headers: { authorization: `Bot ${oldToken}` }, from: '127.0.0.6' });
    t.is(stale.status, 403, stale.text);
    t.is(stale.body?.msg, 'forbidden: the bot token belongs to an earlier bot of this id, since removed');
    const own = await call(agent.server, `/api/bots/${id}/logs?lines=5`, { headers: { authorization: `Bot ${newToken}` }, from: '127.0.0.6' });
    t.is(own.status, 200, own.text);
  } finally {
    server.thaw();
  }
});

test.serial('a console session ended while the database is frozen stays ended when the agent that ended it starts again before the database answers', async (t) => {
  const databaseUrl = await server.freshDatabase(serverUrl);
  const dataDir = mkdtempSync(join(tmpdir(), 'bot-agent-outage-signout-'));
  const config = { databaseUrl, adminToken: ADMIN, loopbackPlatform: false, dataDir };
  const first = await startAgent(new MemoryDriver(), config);
  const started = await call(first.server, '/api/session', { body: { token: ADMIN } });
  t.is(started.status, 200, started.text);
  const cookie = String([started.headers['set-cookie']].flat()[0]).split(';')[0]!;
  const fleet = (agent: TestAgent) => call(agent.server, '/api/console/fleet', { headers: { cookie } });
  t.is((await fleet(first)).status, 200);
  server.freeze();
  let again: TestAgent | undefined;
  try {
    t.is((await call(first.server, '/api/session', { method: 'DELETE', headers: { cookie } })).status, 200);
    await first.close();
    // Started again on the same data folder while the database still does not answer: its spool holds the end.
    again = await startAgent(new MemoryDriver(), config);
    agents.push(again);
    const after = await fleet(again);
    t.is(after.status, 403, `the ended session was taken again after a restart: ${after.text}`);
  } finally {
    server.thaw();
  }
  t.is((await fleet(again)).status, 403, 'taken once the database answered');
});
