import test from 'ava';
import type { Server } from 'node:http';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';

// The whole app over the real engine, called from loopback (the platform).
const fixture = new DockerFixture();
let agent: TestAgent;
let server: Server;

test.before(async () => {
  await fixture.ready();
  agent = await startAgent(createDockerDriver({ dockerHost: fixture.dockerHost }));
  server = agent.server;
});

test.after.always(async () => {
  await agent?.close();
  await fixture.cleanup();
});

const owned = (id: string) => ({ bot_id: id, user_id: 'user_1' });

test('restart restarts the container: its start time changes and it runs', async (t) => {
  const bot = await fixture.runBot();
  const before = await fixture.startedAt(bot);
  const reply = await call(server, '/api/bots/restart', { body: owned(bot.id) });
  t.is(reply.status, 200);
  t.like(reply.body, { ok: true, message: `Bot ${bot.id} restarted` });
  t.not(await fixture.startedAt(bot), before);
  t.true(await fixture.running(bot));
});

test('restart gives the bot its grace period: it saves its state on SIGTERM', async (t) => {
  const bot = await fixture.runBot();
  t.is((await call(server, '/api/bots/restart', { body: owned(bot.id) })).status, 200);
  const logs = await call(server, '/api/bots/logs', { body: { bot_id: bot.id } });
  t.regex(String(logs.body?.logs), /saved state/);
});

test('restart of a stopped bot is a 409 and leaves it stopped', async (t) => {
  const bot = await fixture.runBot({ start: false });
  const reply = await call(server, '/api/bots/restart', { body: owned(bot.id) });
  t.is(reply.status, 409);
  t.regex(String(reply.body?.msg), /container not found.*must be running/);
  t.false(await fixture.running(bot));
});

test('stop and start change the container state and are idempotent', async (t) => {
  const bot = await fixture.runBot();
  t.like(await call(server, '/api/bots/stop', { body: owned(bot.id) }), {
    status: 200,
    body: { ok: true, message: `Bot ${bot.id} stopped` },
  });
  t.false(await fixture.running(bot));
  t.like(await call(server, '/api/bots/stop', { body: owned(bot.id) }), {
    status: 200,
    body: { message: `Bot ${bot.id} was already stopped` },
  });
  t.like(await call(server, '/api/bots/start', { body: owned(bot.id) }), {
    status: 200,
    body: { ok: true, message: `Bot ${bot.id} started` },
  });
  t.true(await fixture.running(bot));
  t.like(await call(server, '/api/bots/start', { body: owned(bot.id) }), {
    status: 200,
    body: { message: `Bot ${bot.id} was already running` },
  });
});

test('the owner label decides who may act: another user_id is a 403', async (t) => {
  const bot = await fixture.runBot({ owner: 'user_77' });
  const before = await fixture.startedAt(bot);
  const reply = await call(server, '/api/bots/restart', { body: owned(bot.id) });
  t.is(reply.status, 403);
  t.regex(String(reply.body?.msg), /user_id/);
  t.is(await fixture.startedAt(bot), before);
  t.is((await call(server, '/api/bots/stop', { body: { bot_id: bot.id, user_id: 'user_77' } })).status, 200);
});

// stdout and stderr in turns, a pause between writes so the engine stores them in that order.
const TALKER = 'for i in $(seq 1 30); do echo out$i; usleep 20000; echo err$i >&2; usleep 20000; done; exec sleep 1000';

test('logs return exactly the last lines of stdout and stderr in order, without framing', async (t) => {
  const bot = await fixture.runBot({ script: TALKER });
  t.true(await eventually(async () => String((await call(server, '/api/bots/logs', { body: { bot_id: bot.id, lines: 1 } })).body?.logs) === 'err30\n'));
  const reply = await call(server, '/api/bots/logs', { body: { bot_id: bot.id, lines: 6 } });
  t.is(reply.status, 200);
  t.is(reply.body?.logs, 'out28\nerr28\nout29\nerr29\nout30\nerr30\n');
  const all = await call(server, '/api/bots/logs', { body: { bot_id: bot.id } });
  t.is(String(all.body?.logs).split('\n').filter(Boolean).length, 60);
});

test('logs of a TTY bot are plain lines too', async (t) => {
  const bot = await fixture.runBot({ script: TALKER, tty: true });
  t.true(await eventually(async () => String((await call(server, '/api/bots/logs', { body: { bot_id: bot.id, lines: 1 } })).body?.logs) === 'err30\n'));
  const reply = await call(server, '/api/bots/logs', { body: { bot_id: bot.id, lines: 4 } });
  t.is(reply.body?.logs, 'out29\nerr29\nout30\nerr30\n');
});

test('logs of a stopped bot can still be read, 100 lines by default', async (t) => {
  const bot = await fixture.runBot({ script: 'seq 1 150', start: true });
  t.true(await eventually(async () => !(await fixture.running(bot))));
  const reply = await call(server, '/api/bots/logs', { body: { bot_id: bot.id } });
  t.is(reply.status, 200);
  const lines = String(reply.body?.logs).trimEnd().split('\n');
  t.is(lines.length, 100);
  t.is(lines[0], '51');
  t.is(lines[99], '150');
});

// Serial: on two cores, other tests' containers would take CPU from the busy bot.
test.serial('stats have the seed types, and a busy bot shows clearly more CPU than an idle one', async (t) => {
  const idle = await fixture.runBot();
  const busy = await fixture.runBot({ script: "trap 'exit 0' TERM; while :; do :; done" });
  const [idleReply, busyReply] = await Promise.all([
    call(server, `/api/bots/${idle.id}/stats`),
    call(server, `/api/bots/${busy.id}/stats`),
  ]);
  t.is(idleReply.status, 200);
  const idleStats = idleReply.body?.stats as Record<string, unknown>;
  const busyStats = busyReply.body?.stats as Record<string, unknown>;
  t.is(typeof idleStats.cpu_percent, 'number');
  t.is(typeof idleStats.memory_percent, 'number');
  t.regex(String(idleStats.memory_usage), /^\d+\.\d\d MB$/);
  t.regex(String(idleStats.uptime), /^\d+h \d+m$/);
  t.true((busyStats.cpu_percent as number) > 25, `busy ${busyStats.cpu_percent}%`);
  t.true((idleStats.cpu_percent as number) < 5, `idle ${idleStats.cpu_percent}%`);
});

test('stats of a stopped bot are a 409', async (t) => {
  const bot = await fixture.runBot({ start: false });
  const reply = await call(server, `/api/bots/${bot.id}/stats`);
  t.is(reply.status, 409);
  t.regex(String(reply.body?.msg), /must be running/);
});

test('a container without the bot label is never touched, even when named like a bot', async (t) => {
  const stranger = await fixture.runBot({ labelled: false });
  const before = await fixture.startedAt(stranger);
  for (const route of ['restart', 'stop', 'start']) {
    const reply = await call(server, `/api/bots/${route}`, { body: owned(stranger.id) });
    t.is(reply.status, 404, route);
    t.regex(String(reply.body?.msg), /container not found/);
  }
  t.is((await call(server, '/api/bots/logs', { body: { bot_id: stranger.id } })).status, 404);
  t.is((await call(server, `/api/bots/${stranger.id}/stats`)).status, 404);
  t.true(await fixture.running(stranger));
  t.is(await fixture.startedAt(stranger), before);
});

test('an unknown bot is a 404', async (t) => {
  const reply = await call(server, '/api/bots/restart', { body: owned(fixture.newBotId()) });
  t.is(reply.status, 404);
  t.regex(String(reply.body?.msg), /container not found/);
});

test('parallel restarts of one bot are one restart on the engine', async (t) => {
  const bot = await fixture.runBot();
  const since = Math.floor(Date.now() / 1000) - 1;
  const replies = await Promise.all(Array.from({ length: 5 }, () => call(server, '/api/bots/restart', { body: owned(bot.id) })));
  for (const reply of replies) t.like(reply, { status: 200, body: { ok: true } });
  t.is(await fixture.restartEvents(bot, since), 1);
});

test('a restart slower than the time-out is a 504, and the restart still completes', async (t) => {
  const slow = await startAgent(createDockerDriver({ dockerHost: fixture.dockerHost }), { restartTimeoutMs: 200 });
  t.teardown(slow.close);
  // Ignores SIGTERM, so the engine waits its whole 2 s grace period.
  const bot = await fixture.runBot({ script: "trap '' TERM; while :; do sleep 1; done", stopTimeout: 2 });
  const before = await fixture.startedAt(bot);
  const reply = await call(slow.server, '/api/bots/restart', { body: owned(bot.id) });
  t.is(reply.status, 504);
  t.regex(String(reply.body?.msg), /timeout during restart/);
  t.true(await eventually(async () => (await fixture.startedAt(bot)) !== before && (await fixture.running(bot))));
});

test('an unreachable engine is a 503 and /readyz says not ready', async (t) => {
  const lost = await startAgent(createDockerDriver({ dockerHost: 'unix:///nonexistent/docker.sock' }));
  t.teardown(lost.close);
  const ready = await call(lost.server, '/readyz');
  t.is(ready.status, 503);
  t.regex(String(ready.body?.msg), /runtime unavailable/);
  const reply = await call(lost.server, '/api/bots/restart', { body: owned('bot_1_1_a') });
  t.is(reply.status, 503);
  t.like(reply.body, { ok: false });
  t.is((await call(server, '/readyz')).status, 200);
});
