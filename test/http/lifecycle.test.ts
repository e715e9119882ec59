import test from 'ava';
import type { AgentConfig } from '../../src/agent.js';
import { agentFor } from '../helpers/agent.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { MemoryDriver } from '../helpers/memory-driver.js';
import { gate } from '../helpers/gate.js';

const BOT = 'bot_1_1_a';
const owner = { bot_id: BOT, user_id: 'user_1' };

async function setUp(t: Parameters<typeof agentFor>[0], config: Partial<AgentConfig> = {}) {
  const driver = new MemoryDriver();
  const bot = driver.add({ id: BOT });
  return { driver, bot, server: await agentFor(t, driver, config) };
}


test('restart answers once the bot runs again, naming it', async (t) => {
  const { bot, server } = await setUp(t);
  const reply = await call(server, '/api/bots/restart', { body: owner });
  t.is(reply.status, 200);
  t.is(reply.body?.ok, true);
  t.regex(String(reply.body?.message), new RegExp(BOT));
  t.is(bot.restarts, 1);
});

test('restart of an unknown bot is a 404 saying container not found', async (t) => {
  const { server } = await setUp(t);
  for (const route of ['restart', 'stop', 'start']) {
    const reply = await call(server, `/api/bots/${route}`, { body: { bot_id: 'bot_9_9_zz', user_id: 'user_1' } });
    t.is(reply.status, 404, route);
    t.like(reply.body, { ok: false });
    t.regex(String(reply.body?.msg), /container not found/, route);
  }
});

test('restart of a stopped bot is a 409: container not found, must be running', async (t) => {
  const { bot, server } = await setUp(t);
  bot.running = false;
  const reply = await call(server, '/api/bots/restart', { body: owner });
  t.is(reply.status, 409);
  t.regex(String(reply.body?.msg), /container not found/);
  t.regex(String(reply.body?.msg), /must be running/);
  t.false(bot.running);
  t.is(bot.restarts, 0);
});

test('a user_id that does not own the bot is a 403 naming user_id, and nothing changes', async (t) => {
  const { driver, server } = await setUp(t);
  for (const route of ['restart', 'stop', 'start']) {
    const reply = await call(server, `/api/bots/${route}`, { body: { bot_id: BOT, user_id: 'user_2' } });
    t.is(reply.status, 403, route);
    t.regex(String(reply.body?.msg), /user_id/, route);
  }
  t.deepEqual(driver.lifecycleCalls, []);
});

test('a bot without an owner is owned by no user_id', async (t) => {
  const { bot, server } = await setUp(t);
  bot.ownerId = undefined;
  const reply = await call(server, '/api/bots/restart', { body: owner });
  t.is(reply.status, 403);
});

test('a restart past the time-out is a 504, and the restart still finishes', async (t) => {
  const { driver, bot, server } = await setUp(t, { restartTimeoutMs: 50 });
  const release = gate();
  driver.restartGate = release.promise;
  const reply = await call(server, '/api/bots/restart', { body: owner });
  t.is(reply.status, 504);
  t.regex(String(reply.body?.msg), /timeout during restart/);
  t.is(bot.restarts, 0);
  release.open();
  t.true(await eventually(() => bot.restarts === 1));
});

test('an unreachable runtime is a 503 runtime unavailable', async (t) => {
  const { driver, server } = await setUp(t);
  driver.reachable = false;
  for (const [path, body] of [
    ['/api/bots/restart', owner],
    ['/api/bots/logs', { bot_id: BOT }],
    [`/api/bots/${BOT}/stats`, undefined],
  ] as const) {
    const reply = await call(server, path, { body });
    t.is(reply.status, 503, path);
    t.regex(String(reply.body?.msg), /runtime unavailable/, path);
  }
});

test('a restart the runtime refuses is a 500 starting with Failed to restart bot', async (t) => {
  const { driver, server } = await setUp(t);
  driver.restartFailure = 'cannot kill container: permission denied';
  const reply = await call(server, '/api/bots/restart', { body: owner });
  t.is(reply.status, 500);
  t.regex(String(reply.body?.msg), /^Failed to restart bot bot_1_1_a: cannot kill container/);
});

test('stop and start change the state, and repeating either succeeds saying so', async (t) => {
  const { bot, server } = await setUp(t);
  const stopped = await call(server, '/api/bots/stop', { body: owner });
  t.like(stopped, { status: 200, body: { ok: true, message: `Bot ${BOT} stopped` } });
  t.false(bot.running);
  const again = await call(server, '/api/bots/stop', { body: owner });
  t.like(again, { status: 200, body: { ok: true, message: `Bot ${BOT} was already stopped` } });
  const started = await call(server, '/api/bots/start', { body: owner });
  t.like(started, { status: 200, body: { ok: true, message: `Bot ${BOT} started` } });
  t.true(bot.running);
  const startedAgain = await call(server, '/api/bots/start', { body: owner });
  t.like(startedAgain, { status: 200, body: { ok: true, message: `Bot ${BOT} was already running` } });
});

test('concurrent restarts of one bot are one restart, and every caller gets its result', async (t) => {
  const { driver, bot, server } = await setUp(t);
  const release = gate();
  driver.restartGate = release.promise;
  const replies = Array.from({ length: 5 }, () => call(server, '/api/bots/restart', { body: owner }));
  // Every request has looked its bot up. From there to joining the restart is no I/O and no timer, only
  // promise steps, which all run before the next turn of the event loop: then every one has joined.
  t.true(await eventually(() => driver.calls.filter((c) => c.startsWith('findBot:')).length === 5));
  await new Promise((resolve) => setImmediate(resolve));
  release.open();
  for (const reply of await Promise.all(replies)) t.like(reply, { status: 200, body: { ok: true } });
  t.is(bot.restarts, 1);
  t.deepEqual(driver.lifecycleCalls, [`restart:${BOT}`]);
});

test('lifecycle operations on one bot never overlap', async (t) => {
  const { driver, bot, server } = await setUp(t, { rateLimit: 100 });
  const routes = ['stop', 'start', 'restart', 'stop', 'start', 'stop', 'start'];
  const replies = await Promise.all(routes.map((route) => call(server, `/api/bots/${route}`, { body: owner })));
  t.true(replies.every((reply) => reply.status === 200 || reply.status === 409));
  t.is(driver.maxInFlight, 1);
  t.true(bot.running);
});

test('a restart goes on to its end when the caller disconnects', async (t) => {
  const { driver, bot, server } = await setUp(t);
  const release = gate();
  driver.restartGate = release.promise;
  const abort = new AbortController();
  const reply = call(server, '/api/bots/restart', { body: owner, signal: abort.signal });
  await eventually(() => driver.lifecycleCalls.length > 0);
  abort.abort();
  await t.throwsAsync(reply);
  release.open();
  t.true(await eventually(() => bot.restarts === 1));
});

test('logs return the last lines, 100 by default', async (t) => {
  const { bot, server } = await setUp(t);
  bot.logLines = Array.from({ length: 150 }, (_, i) => `line ${i + 1}`);
  const byDefault = await call(server, '/api/bots/logs', { body: { bot_id: BOT } });
  t.is(byDefault.status, 200);
  const lines = String(byDefault.body?.logs).trimEnd().split('\n');
  t.is(lines.length, 100);
  t.is(lines[0], 'line 51');
  const three = await call(server, '/api/bots/logs', { body: { bot_id: BOT, lines: 3 } });
  t.is(three.body?.logs, 'line 148\nline 149\nline 150\n');
});

test('logs of an unknown bot are a 404', async (t) => {
  const { server } = await setUp(t);
  const reply = await call(server, '/api/bots/logs', { body: { bot_id: 'bot_2_2_b' } });
  t.is(reply.status, 404);
  t.regex(String(reply.body?.msg), /container not found/);
});

test('stats answer the seed stats object', async (t) => {
  const { server } = await setUp(t);
  const reply = await call(server, `/api/bots/${BOT}/stats`);
  t.is(reply.status, 200);
  const { memory_bytes, memory_limit_bytes, uptime_s, network_rx_bytes, network_tx_bytes, block_read_bytes, block_write_bytes, ...seed } = reply.body?.stats as Record<string, unknown>;
  t.deepEqual({ ...reply.body, stats: seed }, { ok: true, stats: { cpu_percent: 12.35, memory_usage: '45.21 MB', memory_percent: 4.57, uptime: '1h 2m' } });
  // Beside the seed's strings, the same as numbers: the bot's run began 3,723 s before this call was asked.
  t.is(memory_bytes, 47_405_793);
  t.is(memory_limit_bytes, 1_038_000_000);
  t.true(typeof uptime_s === 'number' && uptime_s >= 3_723 && uptime_s < 3_783, String(uptime_s));
  // This runtime tells no I/O: null, never 0.
  t.deepEqual([network_rx_bytes, network_tx_bytes, block_read_bytes, block_write_bytes], [null, null, null, null]);
});

test('stats of a stopped bot are a 409 and of an unknown bot a 404', async (t) => {
  const { bot, server } = await setUp(t);
  bot.running = false;
  const stopped = await call(server, `/api/bots/${BOT}/stats`);
  t.is(stopped.status, 409);
  t.regex(String(stopped.body?.msg), /container not found.*must be running/);
  const unknown = await call(server, '/api/bots/bot_3_3_c/stats');
  t.is(unknown.status, 404);
});

test('past the rate limit, lifecycle operations on a bot are a 429 with Retry-After', async (t) => {
  const { driver, server } = await setUp(t, { rateLimit: 3, rateWindowMs: 60_000 });
  driver.add({ id: 'bot_2_2_b' });
  for (const route of ['stop', 'start', 'restart']) t.is((await call(server, `/api/bots/${route}`, { body: owner })).status, 200);
  const refused = await call(server, '/api/bots/restart', { body: owner });
  t.is(refused.status, 429);
  t.like(refused.body, { ok: false });
  t.regex(String(refused.body?.msg), /too many lifecycle operations on bot bot_1_1_a/);
  t.true(Number(refused.headers['retry-after']) >= 1 && Number(refused.headers['retry-after']) <= 60);
  t.is(driver.lifecycleCalls.length, 3);
  // Each bot has its own budget, and reads are not limited.
  t.is((await call(server, '/api/bots/restart', { body: { bot_id: 'bot_2_2_b', user_id: 'user_1' } })).status, 200);
  t.is((await call(server, '/api/bots/logs', { body: { bot_id: BOT } })).status, 200);
});

test('refused calls do not use up a bot\'s rate limit', async (t) => {
  const { server } = await setUp(t, { rateLimit: 1 });
  for (let i = 0; i < 3; i++) {
    t.is((await call(server, '/api/bots/restart', { body: { bot_id: BOT, user_id: 'user_2' } })).status, 403);
  }
  t.is((await call(server, '/api/bots/restart', { body: owner })).status, 200);
});

test('a stop that waited the restart time-out behind a restart is a 409 naming it, and never runs', async (t) => {
  const { driver, bot, server } = await setUp(t, { restartTimeoutMs: 100 });
  const release = gate();
  driver.restartGate = release.promise;
  const restart = call(server, '/api/bots/restart', { body: owner });
  t.true(await eventually(() => driver.lifecycleCalls.length === 1));
  const stop = await call(server, '/api/bots/stop', { body: owner });
  t.is(stop.status, 409);
  t.regex(String(stop.body?.msg), /^restart in progress/);
  // The restart's caller waited as long, queue and all: 504, and the restart goes on.
  t.is((await restart).status, 504);
  release.open();
  t.true(await eventually(() => bot.restarts === 1));
  t.true(bot.running, 'the dropped stop ran later after all');
  t.deepEqual(driver.lifecycleCalls, [`restart:${BOT}`]);
});

test('a failed or timed-out operation never leaves the bot locked', async (t) => {
  const { driver, bot, server } = await setUp(t, { restartTimeoutMs: 50 });
  driver.restartFailure = 'engine said no';
  t.is((await call(server, '/api/bots/restart', { body: owner })).status, 500);
  driver.restartFailure = undefined;
  let open = (): void => {};
  driver.restartGate = new Promise((resolve) => {
    open = resolve;
  });
  t.is((await call(server, '/api/bots/restart', { body: owner })).status, 504);
  open();
  t.is((await call(server, '/api/bots/stop', { body: owner })).status, 200);
  t.false(bot.running);
  t.is(bot.restarts, 1);
});
