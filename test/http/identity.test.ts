import test from 'ava';
import { BotTokens } from '../../src/identity/bot-tokens.js';
import type { Identity } from '../../src/config.js';
import { agentFor, startAgent } from '../helpers/agent.js';
import { call } from '../helpers/http-client.js';
import { MemoryDriver } from '../helpers/memory-driver.js';

// Identity by token (docs/api.md §4, rule 8), over the in-memory runtime; test/docker/identity.test.ts has real bots.
const A = { id: 'bot_1_1_alpha', address: '127.0.0.21', ownerId: 'user_1' };
const B = { id: 'bot_1_2_beta', address: '127.0.0.22', ownerId: 'user_1' };
/** A mesh sidecar's hop: loopback, but not the host itself. */
const SIDECAR = '127.0.0.6';

/** The platform's token: under token identity loopback is a hop, never the platform (docs/api.md §4, rule 6). */
const ADMIN = 'admin-token-of-at-least-32-characters';
const platform = { authorization: `Bearer ${ADMIN}` };

async function setUp(t: Parameters<typeof agentFor>[0], identity: Identity) {
  const driver = new MemoryDriver();
  driver.add(A);
  driver.add(B);
  const botTokens = BotTokens.open(':memory:');
  const server = await agentFor(t, driver, { identity, botTokens, adminToken: ADMIN });
  const as = (token: string) => ({ authorization: `Bot ${token}` });
  return { driver, server, tokens: { a: as(botTokens.sign(A.id)), b: as(botTokens.sign(B.id)) } };
}

const selfRestart = { method: 'POST', path: '/api/bots/self/restart' };

test('token: the token alone names the bot, from any address, a sidecar hop included; without it a bot is nobody; it never makes the platform', async (t) => {
  const { driver, server, tokens } = await setUp(t, 'token');
  const fromSidecar = await call(server, selfRestart.path, { method: 'POST', headers: tokens.a, from: SIDECAR });
  t.is(fromSidecar.status, 200, fromSidecar.text);
  t.regex(String(fromSidecar.body?.message), new RegExp(A.id));
  // From B's address, A's token is A.
  const crossed = await call(server, `/api/bots/${B.id}/stats`, { headers: tokens.a, from: B.address });
  t.is(crossed.status, 403);
  t.regex(String(crossed.body?.msg), /may manage only itself/);
  t.is((await call(server, `/api/bots/${A.id}/stats`, { headers: tokens.a, from: B.address })).status, 200);
  // A bot's address alone names no one.
  const bare = await call(server, `/api/bots/${A.id}/stats`, { from: A.address });
  t.is(bare.status, 403);
  // The host itself with a bot's token is that bot, not the platform.
  const hostWithToken = await call(server, '/api/events', { headers: tokens.a });
  t.is(hostWithToken.status, 403);
  // Loopback is a hop here: a sidecar (Linkerd) may hand bots' connections over from 127.0.0.1 itself.
  const bareHost = await call(server, '/api/events');
  t.is(bareHost.status, 403, 'the host itself without a token was the platform behind a hop');
  t.is((await call(server, '/api/events', { headers: platform })).status, 200, "the admin token's holder is the platform");
  t.true(driver.lifecycleCalls.every((name) => name.endsWith(A.id)));
});

test('address+token: both must name the same bot', async (t) => {
  const { server, tokens } = await setUp(t, 'address+token');
  t.is((await call(server, `/api/bots/${A.id}/stats`, { headers: tokens.a, from: A.address })).status, 200);
  const otherToken = await call(server, `/api/bots/${A.id}/stats`, { headers: tokens.b, from: A.address });
  t.is(otherToken.status, 403);
  t.regex(String(otherToken.body?.msg), /names another bot than the address/);
  const none = await call(server, `/api/bots/${A.id}/stats`, { from: A.address });
  t.is(none.status, 403);
  t.regex(String(none.body?.msg), /send Authorization: Bot/);
  const hop = await call(server, `/api/bots/${A.id}/stats`, { headers: tokens.a, from: SIDECAR });
  t.is(hop.status, 403);
  t.regex(String(hop.body?.msg), /address no bot holds/);
});

test('a forged or foreign token is refused, saying why, in every mode that reads tokens; address mode reads none', async (t) => {
  for (const identity of ['token', 'address+token'] as const) {
    const { server, tokens } = await setUp(t, identity);
    const [scheme, token] = tokens.a.authorization.split(' ') as [string, string];
    const forged = token.replace(A.id, B.id);
    const reply = await call(server, `/api/bots/${B.id}/stats`, { headers: { authorization: `${scheme} ${forged}` }, from: B.address });
    t.is(reply.status, 403, identity);
    t.is(reply.body?.msg, 'forbidden: the bot token is forged');
    t.false(reply.text.includes(forged), 'the token came back');
    const foreign = BotTokens.open(':memory:').sign(B.id);
    const unknown = await call(server, `/api/bots/${B.id}/stats`, { headers: { authorization: `Bot ${foreign}` }, from: B.address });
    t.regex(String(unknown.body?.msg), /key this agent no longer holds/);
  }
  const { server, tokens } = await setUp(t, 'address');
  t.is((await call(server, `/api/bots/${A.id}/stats`, { headers: tokens.b, from: A.address })).status, 200, 'address mode: the address names the bot');
});

test('the platform asks for a bot\'s token; a bot may not, and it is never answered where no tokens are signed', async (t) => {
  const { server } = await setUp(t, 'address+token');
  const issued = await call(server, `/api/admin/bots/${A.id}/token`, { method: 'POST', headers: platform });
  t.is(issued.status, 200);
  const token = String(issued.body?.token);
  t.is((await call(server, `/api/bots/${A.id}/stats`, { headers: { authorization: `Bot ${token}` }, from: A.address })).status, 200);
  t.is((await call(server, `/api/admin/bots/${A.id}/token`, { method: 'POST', from: A.address, headers: { authorization: `Bot ${token}` } })).status, 403);
  const driver = new MemoryDriver();
  const plain = await agentFor(t, driver);
  t.is((await call(plain, `/api/admin/bots/${A.id}/token`, { method: 'POST' })).status, 501);
});

test("a token signed before its bot was removed names it no more, on this agent at once; one signed after does", async (t) => {
  const driver = new MemoryDriver();
  driver.add(A);
  let now = Date.now() - 10_000;
  const botTokens = BotTokens.open(':memory:', () => now);
  const before = { authorization: `Bot ${botTokens.sign(A.id)}` };
  const agent = await startAgent(driver, { identity: 'token', botTokens });
  t.teardown(() => agent.close());
  const stats = `/api/bots/${A.id}/stats`;
  t.is((await call(agent.server, stats, { headers: before, from: SIDECAR })).status, 200);
  await agent.history.forget(A.id);
  // Created again under the same id, with a token signed now.
  now = Date.now() + 1_000;
  const after = { authorization: `Bot ${botTokens.sign(A.id)}` };
  const refused = await call(agent.server, stats, { headers: before, from: SIDECAR });
  t.is(refused.status, 403);
  t.is(refused.body?.msg, 'forbidden: the bot token was signed before its bot was removed');
  t.is((await call(agent.server, stats, { headers: after, from: SIDECAR })).status, 200, refused.text);
});
