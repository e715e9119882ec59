import test from 'ava';
import { pino } from 'pino';
import type { Identity } from '../../src/config.js';
import { BotTokens } from '../../src/identity/bot-tokens.js';
import { asPlatform } from '../helpers/agent.js';
import { lineSink } from '../helpers/log-sink.js';
import { DockerFixture, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { call } from '../helpers/http-client.js';
import { provisioningAgent } from '../helpers/provisioning-agent.js';
import type { ProvisioningAgent } from '../helpers/provisioning-agent.js';

// Identity by token on the real engine (docs/api.md §4, rule 8): the token the agent gives each bot it
// creates, presented from inside real containers, and never in the agent's log.
const fixture = new DockerFixture();
const logLines: string[] = [];
const agents: ProvisioningAgent[] = [];
const botTokens = BotTokens.open(':memory:');

async function agent(identity: Identity, tokens = botTokens): Promise<ProvisioningAgent> {
  const made = await provisioningAgent(fixture, identity, { tokens, logger: pino(lineSink(logLines)) });
  agents.push(made);
  return made;
}

test.before(() => fixture.ready());

test.after.always(async () => {
  for (const made of agents) await made.close();
  await fixture.cleanup();
});

const envOf = async (id: string): Promise<Record<string, string>> =>
  Object.fromEntries(
    ((await fixture.docker.getContainer(id).inspect()).Config.Env ?? []).map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]),
  );

test('address+token: a created bot carries its token and acts on itself with it; its address without it, another bot with it, and a forgery are refused; no log line holds a token', async (t) => {
  const { server, target } = await agent('address+token');
  const id = fixture.newBotId();
  t.teardown(() => fixture.docker.getContainer(id).remove({ force: true }).catch(() => undefined));
  const created = await call(server, '/api/admin/bots', {
    headers: asPlatform,
    body: { bot_id: id, user_id: 'user_9', image: TEST_IMAGE, template: 'telegram', token: 'telegram-secret-0123456789', command: ['sleep', '1000'] },
  });
  t.is(created.status, 201, created.text);
  const token = (await envOf(id)).PLATFORM_AGENT_TOKEN ?? '';
  // Bound to this bot: the value it was made with, kept on its container, is in its token.
  const generation = (await fixture.docker.getContainer(id).inspect()).Config.Labels['bot-agent/generation'] ?? 'none';
  t.regex(token, new RegExp(`^bat2\\.${id}\\.${generation}\\.`));
  t.false(created.text.includes(token));
  const bot = { id, container: fixture.docker.getContainer(id) };

  const own = await fixture.httpFromBot(bot, target, { method: 'GET', path: `/api/bots/${id}/stats`, headers: { authorization: `Bot ${token}` } });
  t.is(own.status, 200, own.raw);
  const bare = await fixture.httpFromBot(bot, target, { method: 'GET', path: `/api/bots/${id}/stats` });
  t.is(bare.status, 403, bare.raw);
  t.regex(String(bare.body?.msg), /send Authorization: Bot/);

  // Another bot that got hold of the token, calling from its own address.
  const thief = await fixture.runBot();
  const stolen = await fixture.httpFromBot(thief, target, { method: 'GET', path: `/api/bots/${id}/stats`, headers: { authorization: `Bot ${token}` } });
  t.is(stolen.status, 403, stolen.raw);
  t.regex(String(stolen.body?.msg), /names another bot than the address/);
  const forged = `${token.slice(0, -3)}${token.endsWith('AAA') ? 'BBB' : 'AAA'}`;
  const forgery = await fixture.httpFromBot(bot, target, { method: 'GET', path: `/api/bots/${id}/stats`, headers: { authorization: `Bot ${forged}` } });
  t.is(forgery.status, 403, forgery.raw);
  t.is(forgery.body?.msg, 'forbidden: the bot token is forged');

  const restarted = await fixture.httpFromBot(bot, target, { method: 'POST', path: '/api/bots/self/restart', headers: { authorization: `Bot ${token}` } });
  t.is(restarted.status, 200, restarted.raw);
  t.true(logLines.length > 0);
  for (const secret of [token, forged]) t.false(logLines.some((line) => line.includes(secret)), 'a token reached the log');
});

test('token: a bot is told apart by its token through a sidecar-style hop (127.0.0.6), and is never the platform', async (t) => {
  const { server } = await agent('token');
  const [bot, other] = await Promise.all([fixture.runBot(), fixture.runBot()]);
  const token = botTokens.sign(bot.id);
  const headers = { authorization: `Bot ${token}` };
  const hop = await call(server, `/api/bots/${bot.id}/stats`, { headers, from: '127.0.0.6' });
  t.is(hop.status, 200, hop.text);
  const naming = await call(server, `/api/bots/${other.id}/stats`, { headers, from: '127.0.0.6' });
  t.is(naming.status, 403);
  t.regex(String(naming.body?.msg), /may manage only itself/);
  // The host itself, with a bot's token: that bot, not the platform.
  t.is((await call(server, '/api/events', { headers })).status, 403);
  t.is((await call(server, `/api/bots/${other.id}/stats`, { headers })).status, 403);
  t.false(logLines.some((line) => line.includes(token)), 'a token reached the log');
});

test('token: a bot removed and created again under its id is named by its new token, not by the removed one\'s', async (t) => {
  // Its own keys: the agent it is given to reads its removals (the file's other agents would read theirs).
  const { server, target } = await agent('token', BotTokens.open(':memory:'));
  const id = fixture.newBotId();
  t.teardown(() => fixture.docker.getContainer(id).remove({ force: true }).catch(() => undefined));
  const create = () =>
    call(server, '/api/admin/bots', { headers: asPlatform, body: { bot_id: id, user_id: 'user_9', image: TEST_IMAGE, template: 'telegram', token: 'telegram-secret-0123456789', command: ['sleep', '1000'] } });
  t.is((await create()).status, 201);
  const removedToken = (await envOf(id)).PLATFORM_AGENT_TOKEN ?? '';
  // Tokens are signed to the second: the removal comes in a later one.
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  t.is((await call(server, `/api/admin/bots/${id}`, { method: 'DELETE', headers: asPlatform })).status, 200);
  t.is((await create()).status, 201);
  const newToken = (await envOf(id)).PLATFORM_AGENT_TOKEN ?? '';
  t.not(newToken, removedToken);
  const bot = { id, container: fixture.docker.getContainer(id) };
  const stats = (token: string) => fixture.httpFromBot(bot, target, { method: 'GET', path: `/api/bots/${id}/stats`, headers: { authorization: `Bot ${token}` } });
  const stale = await stats(removedToken);
  t.is(stale.status, 403, stale.raw);
  // Refused by the runtime's word (the new bot's generation), or, while its index has not yet seen the old bot go, by the removal.
  t.regex(String(stale.body?.msg), /^forbidden: the bot token (belongs to an earlier bot of this id, since removed|was signed before its bot was removed)$/);
  const fresh = await stats(newToken);
  t.is(fresh.status, 200, fresh.raw);
});

test('a bot whose id holds capitals, as the contract allows, is named by its token from its own container (address+token) and through a hop (token)', async (t) => {
  const bot = await fixture.runBot({ id: `${fixture.newBotId()}AbC` });
  const headers = { authorization: `Bot ${botTokens.sign(bot.id)}` };
  const both = await agent('address+token');
  const own = await fixture.httpFromBot(bot, both.target, { method: 'GET', path: `/api/bots/${bot.id}/stats`, headers });
  t.is(own.status, 200, own.raw);
  const byToken = await agent('token');
  const hop = await call(byToken.server, `/api/bots/${bot.id}/stats`, { headers, from: '127.0.0.6' });
  t.is(hop.status, 200, hop.text);
  // The same id in lower case is another bot: the token does not name it.
  const lower = await call(byToken.server, `/api/bots/${bot.id.toLowerCase()}/stats`, { headers, from: '127.0.0.6' });
  t.is(lower.status, 403, lower.text);
});
