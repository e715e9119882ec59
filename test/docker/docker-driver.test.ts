import test from 'ava';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { DockerFixture, IDLE_BOT } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';

// What only the Docker runtime shows; the behaviours of every runtime are in docker-behaviours.test.ts.
const fixture = new DockerFixture();
let agent: TestAgent;
let server: Server;

test.before(async () => {
  await fixture.ready();
  agent = await startAgent(createDockerDriver({ dockerHost: fixture.dockerHost }), {}, '0.0.0.0');
  server = agent.server;
});

test.after.always(async () => {
  await agent?.close();
  await fixture.cleanup();
});

const owned = (id: string) => ({ bot_id: id, user_id: 'user_1' });
const lastLine = async (id: string, line: string) =>
  eventually(async () => (await call(server, '/api/bots/logs', { body: { bot_id: id, lines: 1 } })).body?.logs === line);

test('restart gives the bot its grace period: it saves its state on SIGTERM', async (t) => {
  const bot = await fixture.runBot({ script: `${IDLE_BOT.replace('; while', '; echo ready; while')}` });
  t.true(await lastLine(bot.id, 'ready\n'), 'the bot never set its SIGTERM trap');
  t.is((await call(server, '/api/bots/restart', { body: owned(bot.id) })).status, 200);
  const logs = await call(server, '/api/bots/logs', { body: { bot_id: bot.id } });
  t.regex(String(logs.body?.logs), /saved state/);
});

// stdout and stderr in turns, a pause between writes so that the engine stores them in that order. The engine
// reads the two pipes apart, so under load a 20 ms pause was once too short (err28 stored before out28).
const TALKER = 'for i in $(seq 1 30); do echo out$i; usleep 100000; echo err$i >&2; usleep 100000; done; exec sleep 1000';

test('logs interleave stdout and stderr in time order, without stream framing', async (t) => {
  const bot = await fixture.runBot({ script: TALKER });
  t.true(await lastLine(bot.id, 'err30\n'));
  const reply = await call(server, '/api/bots/logs', { body: { bot_id: bot.id, lines: 6 } });
  t.is(reply.body?.logs, 'out28\nerr28\nout29\nerr29\nout30\nerr30\n');
  const all = await call(server, '/api/bots/logs', { body: { bot_id: bot.id } });
  t.is(String(all.body?.logs).split('\n').filter(Boolean).length, 60);
});

test('logs of a TTY bot are plain lines too', async (t) => {
  const bot = await fixture.runBot({ script: TALKER, tty: true });
  t.true(await lastLine(bot.id, 'err30\n'));
  const reply = await call(server, '/api/bots/logs', { body: { bot_id: bot.id, lines: 4 } });
  t.is(reply.body?.logs, 'out29\nerr29\nout30\nerr30\n');
});

test('logs of a stopped bot can still be read', async (t) => {
  const bot = await fixture.runBot({ script: 'seq 1 150' });
  t.true(await eventually(async () => !(await fixture.running(bot))));
  const reply = await call(server, '/api/bots/logs', { body: { bot_id: bot.id, lines: 2 } });
  t.like(reply, { status: 200, body: { ok: true, logs: '149\n150\n' } });
});

// Serial: on two cores, other tests' containers would take CPU from the busy bot.
test.serial('a busy bot shows clearly more CPU than an idle one', async (t) => {
  const idle = await fixture.runBot();
  const busy = await fixture.runBot({ script: "trap 'exit 0' TERM; while :; do :; done" });
  const [idleReply, busyReply] = await Promise.all([
    call(server, `/api/bots/${idle.id}/stats`),
    call(server, `/api/bots/${busy.id}/stats`),
  ]);
  const idleCpu = (idleReply.body?.stats as { cpu_percent: number }).cpu_percent;
  const busyCpu = (busyReply.body?.stats as { cpu_percent: number }).cpu_percent;
  // Clearly more, not a share of a core: on a machine whose cores are busy with other work a spinning bot gets a
  // little of one (21.5% was measured beside two busy loops, 8.8% beside them and the whole suite), an idle one none.
  t.true(busyCpu > 4 * Math.max(idleCpu, 1), `busy ${busyCpu}%, idle ${idleCpu}%`);
  t.true(idleCpu < 5, `idle ${idleCpu}%`);
});

test('a container without the bot label calling the agent is refused', async (t) => {
  const [stranger, bot] = await Promise.all([fixture.runBot({ labelled: false }), fixture.runBot()]);
  const before = await fixture.startedAt(bot);
  const target = { host: (await fixture.network()).gateway, port: (server.address() as AddressInfo).port };
  const self = await fixture.httpFromBot(stranger, target, { method: 'POST', path: '/api/bots/self/restart' });
  t.is(self.status, 403, self.raw);
  t.regex(String(self.body?.msg), /forbidden/);
  const named = await fixture.httpFromBot(stranger, target, {
    method: 'POST',
    path: '/api/bots/restart',
    body: owned(bot.id),
  });
  t.is(named.status, 403, named.raw);
  t.is(await fixture.startedAt(bot), before);
});
