import test from 'ava';
import { identifyCaller } from '../../src/http/caller.js';
import { agentFor } from '../helpers/agent.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { MemoryDriver } from '../helpers/memory-driver.js';

// Bots "live" at loopback addresses other than 127.0.0.1, so that a test can call from them.
const SELF = { id: 'bot_1_1_self', address: '127.0.0.7' };
const OTHER = { id: 'bot_2_2_other', address: '127.0.0.8' };

async function setUp(t: Parameters<typeof agentFor>[0]) {
  const driver = new MemoryDriver();
  const self = driver.add({ ...SELF, logLines: ['mine'] });
  const other = driver.add({ ...OTHER, ownerId: 'user_2', logLines: ['secret of the other bot'] });
  return { driver, self, other, server: await agentFor(t, driver) };
}

test('self restart from a bot with no header restarts the caller, answering before it restarts', async (t) => {
  const { driver, self, server } = await setUp(t);
  let open = (): void => {};
  driver.restartGate = new Promise((resolve) => {
    open = resolve;
  });
  const reply = await call(server, '/api/bots/self/restart', { method: 'POST', from: SELF.address });
  t.is(reply.status, 200);
  t.is(reply.body?.ok, true);
  t.regex(String(reply.body?.message), new RegExp(SELF.id));
  t.is(self.restarts, 0, 'the answer came while the restart was held back');
  open();
  t.true(await eventually(() => self.restarts === 1));
});

test('self restart with the caller own id in X-Bot-ID restarts it', async (t) => {
  const { self, server } = await setUp(t);
  const reply = await call(server, '/api/bots/self/restart', {
    method: 'POST',
    from: SELF.address,
    headers: { 'x-bot-id': SELF.id },
  });
  t.is(reply.status, 200);
  t.true(await eventually(() => self.restarts === 1));
});

test('self restart from loopback with no header is a 400 asking for X-Bot-ID', async (t) => {
  const { driver, server } = await setUp(t);
  const reply = await call(server, '/api/bots/self/restart', { method: 'POST' });
  t.is(reply.status, 400);
  t.regex(String(reply.body?.msg), /bot identifier not found/);
  t.regex(String(reply.body?.msg), /X-Bot-ID/);
  t.deepEqual(driver.lifecycleCalls, []);
});

test('self restart from loopback with X-Bot-ID restarts that bot and waits for it', async (t) => {
  const { other, server } = await setUp(t);
  const reply = await call(server, '/api/bots/self/restart', { method: 'POST', headers: { 'x-bot-id': OTHER.id } });
  t.is(reply.status, 200);
  t.is(other.restarts, 1);
});

const namingTheOther: Array<[string, string, unknown, Record<string, string>]> = [
  ['self restart header', '/api/bots/self/restart', undefined, { 'x-bot-id': OTHER.id }],
  ['restart body', '/api/bots/restart', { bot_id: OTHER.id, user_id: 'user_2' }, {}],
  ['stop body', '/api/bots/stop', { bot_id: OTHER.id, user_id: 'user_2' }, {}],
  ['start body', '/api/bots/start', { bot_id: OTHER.id, user_id: 'user_2' }, {}],
  ['logs body', '/api/bots/logs', { bot_id: OTHER.id }, {}],
  ['stats path', `/api/bots/${OTHER.id}/stats`, undefined, {}],
];

for (const [where, path, body, headers] of namingTheOther) {
  test(`a bot naming another bot in the ${where} is a 403 and the other bot is untouched`, async (t) => {
    const { driver, other, server } = await setUp(t);
    const reply = await call(server, path, {
      method: path.endsWith('stats') ? 'GET' : 'POST',
      body,
      from: SELF.address,
      headers: { ...headers, authorization: 'Bearer whatever' },
    });
    t.is(reply.status, 403);
    t.is(reply.body?.ok, false);
    t.regex(String(reply.body?.msg), /a bot may manage only itself/);
    t.notRegex(reply.text, /secret of the other bot/);
    t.deepEqual(driver.calls, []);
    t.true(other.running);
    t.is(other.restarts, 0);
  });
}

test('a bot holding the admin token is still only itself', async (t) => {
  const driver = new MemoryDriver();
  driver.add(SELF);
  driver.add(OTHER);
  const server = await agentFor(t, driver, { adminToken: 'the-admin-token-of-32-characters' });
  const reply = await call(server, '/api/bots/logs', {
    body: { bot_id: OTHER.id },
    from: SELF.address,
    headers: { authorization: 'Bearer the-admin-token-of-32-characters' },
  });
  t.is(reply.status, 403);
});

test('a bot may read its own logs and stats, and stop and start itself', async (t) => {
  const { self, server } = await setUp(t);
  const logs = await call(server, '/api/bots/logs', { body: { bot_id: SELF.id }, from: SELF.address });
  t.like(logs, { status: 200, body: { ok: true, logs: 'mine\n' } });
  const stats = await call(server, `/api/bots/${SELF.id}/stats`, { from: SELF.address });
  t.like(stats, { status: 200, body: { ok: true } });
  const start = await call(server, '/api/bots/start', { body: { bot_id: SELF.id, user_id: 'user_1' }, from: SELF.address });
  t.like(start, { status: 200, body: { ok: true, message: `Bot ${SELF.id} was already running` } });
  const stop = await call(server, '/api/bots/stop', { body: { bot_id: SELF.id, user_id: 'user_1' }, from: SELF.address });
  t.like(stop, { status: 200, body: { ok: true } });
  t.true(await eventually(() => !self.running), 'a bot stopping itself is stopped after its answer');
});

test('a bot restarting itself through the standard restart is answered first', async (t) => {
  const { driver, self, server } = await setUp(t);
  let open = (): void => {};
  driver.restartGate = new Promise((resolve) => {
    open = resolve;
  });
  const reply = await call(server, '/api/bots/restart', {
    body: { bot_id: SELF.id, user_id: 'user_1' },
    from: SELF.address,
  });
  t.like(reply, { status: 200, body: { ok: true } });
  t.is(self.restarts, 0);
  open();
  t.true(await eventually(() => self.restarts === 1));
});

test('a bot naming itself with a user_id that is not its owner is a 403', async (t) => {
  const { driver, server } = await setUp(t);
  const reply = await call(server, '/api/bots/restart', {
    body: { bot_id: SELF.id, user_id: 'user_2' },
    from: SELF.address,
  });
  t.is(reply.status, 403);
  t.regex(String(reply.body?.msg), /user_id/);
  t.deepEqual(driver.lifecycleCalls, []);
});

test('a stopped bot\'s address is no longer that bot', async (t) => {
  const { self, server } = await setUp(t);
  self.running = false;
  // The address now falls back to what it is: a 127/8 address other than the host's own, so nobody
  // (no longer the bot, which would be told it may manage only itself).
  const reply = await call(server, '/api/bots/logs', { body: { bot_id: OTHER.id }, from: SELF.address });
  t.is(reply.status, 403);
  t.regex(String(reply.body?.msg), /neither a bot, nor the platform/);
});

test("a connection from a service mesh's hop (127.0.0.6) naming localhost reads nothing and acts on nothing", async (t) => {
  const { server } = await setUp(t);
  for (const [path, body] of [['/api/bots/logs', { bot_id: OTHER.id }], ['/api/bots/stop', { bot_id: OTHER.id, user_id: 'user_1' }]] as const) {
    const reply = await call(server, path, { body, from: '127.0.0.6', headers: { host: 'localhost' } });
    t.is(reply.status, 403, path);
  }
  t.is((await call(server, '/api/bots/logs', { body: { bot_id: OTHER.id }, from: '127.0.0.1' })).status, 200, 'the host itself is the platform');
});

// Callers that are neither bots nor loopback cannot be made over loopback, so the
// classification is tested directly; no traffic leaves the machine.
const policy = (adminToken: string | undefined, trustedHosts: string[] = [], loopbackPlatform = true) => ({ adminToken, trustedHosts, loopbackPlatform });

const driverWithBot = (): MemoryDriver => {
  const driver = new MemoryDriver();
  driver.add({ id: 'bot_5_5_e', address: '10.1.2.3' });
  return driver;
};

test('a caller that is neither a bot, nor loopback, nor holds the admin token is forbidden', async (t) => {
  const error = await t.throwsAsync(
    identifyCaller({ address: '10.9.9.9', authorization: undefined }, driverWithBot(), policy('token-1')),
  );
  t.is((error as { status?: number }).status, 403);
  t.regex(error.message, /forbidden/);
});

test('the admin token makes any other address the platform; a wrong or absent token does not', async (t) => {
  const driver = driverWithBot();
  t.deepEqual(await identifyCaller({ address: '10.9.9.9', authorization: 'Bearer token-1' }, driver, policy('token-1')), {
    kind: 'platform',
  });
  for (const authorization of ['Bearer token-2', 'Bearer token-1x', 'token-1', 'Basic token-1', '']) {
    await t.throwsAsync(identifyCaller({ address: '10.9.9.9', authorization }, driver, policy('token-1')), undefined, authorization);
  }
  await t.throwsAsync(identifyCaller({ address: '10.9.9.9', authorization: 'Bearer token-1' }, driver, policy(undefined)));
});

test('a bot is identified by its address, IPv4-mapped or not', async (t) => {
  const driver = driverWithBot();
  for (const address of ['10.1.2.3', '::ffff:10.1.2.3']) {
    t.deepEqual(await identifyCaller({ address, authorization: undefined }, driver, policy(undefined)), {
      kind: 'bot',
      botId: 'bot_5_5_e',
    });
  }
});

test('the host itself, in IPv4, IPv4-mapped and IPv6 form, is the platform', async (t) => {
  for (const address of ['127.0.0.1', '::ffff:127.0.0.1', '::1']) {
    t.deepEqual(await identifyCaller({ address, authorization: undefined }, driverWithBot(), policy(undefined)), {
      kind: 'platform',
    });
  }
});

test("another 127/8 address is a proxy's hop (a service mesh's sidecar hands connections over from 127.0.0.6): nobody, whatever Host it names", async (t) => {
  for (const address of ['127.0.0.6', '127.9.9.9', '::ffff:127.0.0.6']) {
    const error = await t.throwsAsync(identifyCaller({ address, authorization: undefined, host: 'localhost' }, driverWithBot(), policy(undefined)));
    t.is((error as { status?: number }).status, 403, address);
  }
  t.deepEqual(await identifyCaller({ address: '127.0.0.6', authorization: 'Bearer token-1' }, driverWithBot(), policy('token-1')), { kind: 'platform' }, 'the token still is');
});

test('with AGENT_LOOPBACK_PLATFORM=off the host itself is nobody; the token is the platform', async (t) => {
  const error = await t.throwsAsync(identifyCaller({ address: '127.0.0.1', authorization: undefined, host: 'localhost' }, driverWithBot(), policy(undefined, [], false)));
  t.is((error as { status?: number }).status, 403);
  t.deepEqual(await identifyCaller({ address: '::1', authorization: 'Bearer token-1' }, driverWithBot(), policy('token-1', [], false)), { kind: 'platform' });
});

test('loopback is the platform only for what no web page could send (Host, Origin, Sec-Fetch-Site)', async (t) => {
  const platform = { kind: 'platform' };
  const fromLoopback = (headers: { host?: string; origin?: string; fetchSite?: string }, trusted: string[] = []) =>
    identifyCaller({ address: '127.0.0.1', authorization: undefined, ...headers }, driverWithBot(), policy(undefined, trusted));
  for (const host of [undefined, 'localhost', 'LOCALHOST:8000', '127.0.0.1', '127.0.0.1:8000', '127.1.2.3:80', '[::1]', '[::1]:8000']) {
    t.deepEqual(await fromLoopback({ host }), platform, String(host));
  }
  t.deepEqual(await fromLoopback({ host: 'localhost:8000', origin: 'http://127.0.0.1:3000', fetchSite: 'same-origin' }), platform);
  t.deepEqual(await fromLoopback({ host: 'agent.internal:8000' }, ['agent.internal']), platform, 'a trusted host');
  t.deepEqual(await fromLoopback({ host: 'localhost', fetchSite: 'none' }), platform, 'typed into the address bar');
  const pageCould = [
    { host: 'evil.example:8000' },
    { host: 'agent.internal:8000' },
    { host: '127.0.0.1.evil.example' },
    { host: 'localhost.evil.example:8000' },
    { host: 'localhost', origin: 'http://evil.example' },
    { host: 'localhost', origin: 'null' },
    { host: 'localhost', origin: 'http://localhost.evil.example' },
    { host: 'localhost', fetchSite: 'cross-site' },
    { host: 'localhost', fetchSite: 'same-site' },
  ];
  for (const headers of pageCould) {
    const error = await t.throwsAsync(fromLoopback(headers), undefined, JSON.stringify(headers));
    t.is((error as { status?: number }).status, 403);
    t.regex(error!.message, /^forbidden: cross-site request/);
  }
});

test('the admin token is the platform whatever Host or Origin says; a bot is a bot', async (t) => {
  const evil = { host: 'evil.example', origin: 'http://evil.example', fetchSite: 'cross-site' };
  t.deepEqual(await identifyCaller({ address: '127.0.0.1', authorization: 'Bearer token-1', ...evil }, driverWithBot(), policy('token-1')), {
    kind: 'platform',
  });
  t.deepEqual(await identifyCaller({ address: '10.1.2.3', authorization: undefined, ...evil }, driverWithBot(), policy(undefined)), {
    kind: 'bot',
    botId: 'bot_5_5_e',
  });
});
