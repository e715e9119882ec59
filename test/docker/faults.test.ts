import type { AddressInfo } from 'node:net';
import test from 'ava';
import { DockerBotIndex } from '../../src/runtime/docker/docker-bot-index.js';
import { QUICK_CONNECTIONS } from '../../src/runtime/docker/docker-connection.js';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import Docker from 'dockerode';
import { startAgent } from '../helpers/agent.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { SocketProxy } from '../helpers/socket-proxy.js';

// The engine cut off, stalled and back, through a proxy in front of its socket.
// Calls get a 10 s client time-out, so that a hang fails a test instead of holding it.
const fixture = new DockerFixture();

test.before(async () => {
  await fixture.ready();
});

test.after.always(async () => {
  await fixture.cleanup();
});

async function setUp(t: { teardown(fn: () => Promise<void>): void }) {
  const proxy = new SocketProxy();
  await proxy.start();
  const agent = await startAgent(createDockerDriver({ dockerHost: proxy.dockerHost }), {}, '0.0.0.0');
  t.teardown(async () => {
    await agent.close();
    await proxy.close();
  });
  return { proxy, server: agent.server };
}

const within10s = () => ({ signal: AbortSignal.timeout(10_000) });
const owned = (id: string) => ({ bot_id: id, user_id: 'user_1' });

for (const fault of ['cut', 'stall'] as const) {
  test(`an engine ${fault === 'cut' ? 'cut off' : 'that stalls'} is a 503 on every call, and the agent recovers by itself`, async (t) => {
    const { proxy, server } = await setUp(t);
    // Its log kept by the engine alone (no json-file the agent could read without it).
    const bot = await fixture.runBot({ script: "echo up; trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done", logDriver: 'local' });
    t.is((await call(server, `/api/bots/${bot.id}/stats`, within10s())).status, 200);
    proxy[fault]();
    if (fault === 'stall') {
      // A running bot's stats need no engine call: the host's cgroup files answer them until the index,
      // whose event stream a stall does not end, notices at its next ping (every 10 s) that the engine is gone.
      const stats = await call(server, `/api/bots/${bot.id}/stats`, within10s());
      t.true(stats.status === 200 || stats.status === 503, stats.text);
    }
    for (const [path, body] of [
      ['/readyz', undefined],
      ['/api/bots/logs', { bot_id: bot.id }],
      ...(fault === 'cut' ? [[`/api/bots/${bot.id}/stats`, undefined] as const] : []),
      ['/api/bots/restart', owned(bot.id)],
      ['/api/bots/stop', owned(bot.id)],
    ] as const) {
      const reply = await call(server, path, { body, ...within10s() });
      t.is(reply.status, 503, `${path}: ${reply.text}`);
      t.regex(String(reply.body?.msg), /runtime unavailable/);
    }
    t.true(await fixture.running(bot), 'a refused stop left the bot running');
    proxy.restore();
    t.true(await eventually(async () => (await call(server, '/readyz', within10s())).status === 200));
    t.like(await call(server, '/api/bots/logs', { body: { bot_id: bot.id }, ...within10s() }), {
      status: 200,
      body: { logs: 'up\n' },
    });
    const stats = await call(server, `/api/bots/${bot.id}/stats`, within10s());
    t.is(stats.status, 200, stats.text);
  });
}

test('an engine slow to answer an inspection (it holds one while it handles a container\'s exit, up to 2 s) is waited for, not a 503', async (t) => {
  const { proxy, server } = await setUp(t);
  const bot = await fixture.runBot();
  proxy.delay(new RegExp(`^GET \\S*/containers/${bot.id}/json`), 2_500);
  const status = await call(server, `/api/bots/${bot.id}`, within10s());
  t.is(status.status, 200, status.text);
  t.like(status.body?.bot, { bot_id: bot.id, state: 'running' });
  const exits = await call(server, `/api/bots/${bot.id}/exits`, within10s());
  t.is(exits.status, 200, exits.text);
  t.true(proxy.requests.some((line) => line.includes(`/containers/${bot.id}/json`)), 'the engine was asked');
});

test('after the engine comes back, a bot started meanwhile is known by its address', async (t) => {
  const { proxy, server } = await setUp(t);
  const target = { host: (await fixture.network()).gateway, port: (server.address() as AddressInfo).port };
  const first = await fixture.runBot();
  t.is((await fixture.httpFromBot(first, target, { method: 'POST', path: '/api/bots/logs', body: { bot_id: first.id } })).status, 200);
  proxy.cut();
  const later = await fixture.runBot();
  proxy.restore();
  const reply = await fixture.httpFromBot(later, target, { method: 'POST', path: '/api/bots/logs', body: { bot_id: later.id } });
  t.is(reply.status, 200, reply.raw);
});

test('the identity index goes dark while its event stream is down, and is rebuilt when it reconnects', async (t) => {
  const proxy = new SocketProxy();
  await proxy.start();
  const index = new DockerBotIndex(new Docker({ socketPath: proxy.path }));
  t.teardown(async () => {
    index.close();
    await proxy.close();
  });
  t.true(await eventually(() => index.byIndex('address', '10.255.255.254') !== undefined, 60_000), 'the index never came up');
  proxy.cut();
  t.true(await eventually(() => index.byIndex('address', '10.255.255.254') === undefined), 'the index kept answering without its stream');
  const bot = await fixture.runBot();
  const address = Object.values((await bot.container.inspect()).NetworkSettings.Networks)[0]?.IPAddress ?? '';
  proxy.restore();
  t.true(await eventually(() => index.byIndex('address', address)?.[0]?.botId === bot.id), 'the index was not rebuilt');
});

// A connection to the engine for every call would cost a logs read about as much as the engine's answer: the
// agent keeps them open (src/runtime/docker/docker-connection.ts), and a connection the engine drops is not used again.
test('calls to the engine share kept-alive connections; once every one of them is dropped (an engine restarted), each call after answers', async (t) => {
  const { proxy, server } = await setUp(t);
  // Its logs read through the engine: no json-file the agent reads itself.
  const bot = await fixture.runBot({ script: "for i in 1 2 3; do echo line $i; done; trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done", logDriver: 'local' });
  const logs = () => call(server, '/api/bots/logs', { body: { bot_id: bot.id, lines: 3 }, ...within10s() });
  t.is((await logs()).status, 200);
  const before = proxy.connectionsAccepted;
  const requestsBefore = proxy.requests.length;
  for (let i = 0; i < 40; i += 1) t.is((await logs()).status, 200);
  // Each read asked the engine at least once (a read whose entries held no whole line asks again, for more).
  const made = proxy.requests.slice(requestsBefore);
  const asked = made.filter((line) => line.includes('/logs?')).length;
  t.true(asked >= 40, `${asked} logs requests`);
  // Other test files' containers come and go meanwhile on the same engine: the index's inspection of each, at once
  // with a read, may need a connection of its own. The reads themselves open at most 4 between them.
  const others = made.length - asked;
  const opened = proxy.connectionsAccepted - before;
  t.true(opened <= 4 + others, `40 reads opened ${opened} connections to the engine, beside ${others} other requests`);
  // Every connection dropped while reads keep coming, as an engine restarting drops them.
  let reading = true;
  const during = (async () => {
    const statuses: number[] = [];
    while (reading) statuses.push((await logs()).status);
    return statuses;
  })();
  await new Promise((resolve) => setTimeout(resolve, 100));
  proxy.restore();
  await new Promise((resolve) => setTimeout(resolve, 100));
  reading = false;
  t.deepEqual((await during).filter((status) => status !== 200 && status !== 503), [], 'a call under way as its connection dropped is answered or a 503');
  const after: number[] = [];
  for (let i = 0; i < 20; i += 1) after.push((await logs()).status);
  t.deepEqual(after, Array.from({ length: 20 }, () => 200), 'every call after the drop answered');
});

test(`quick calls wait for one of at most ${QUICK_CONNECTIONS} connections to the engine, however many come at once; one idle for seconds is used again`, async (t) => {
  const { proxy, server } = await setUp(t);
  const bot = await fixture.runBot();
  const status = () => call(server, `/api/bots/${bot.id}`, within10s());
  t.is((await status()).status, 200);
  // Every inspection of the bot held 200 ms by the engine: 100 reads of its status at once would each want a connection.
  proxy.delay(new RegExp(`^GET \\S*/containers/${bot.id}/json`), 200);
  proxy.peakConnections = 0;
  const replies = await Promise.all(Array.from({ length: 100 }, status));
  proxy.undelay();
  t.deepEqual(replies.filter((reply) => reply.status !== 200).map((reply) => reply.text), [], 'every read answered, within its deadline');
  // Beside the quick calls' connections: the event stream's, and one lasting call's (such as the last lines of another
  // file's bot that ended meanwhile on the same engine: a busy rehearsal saw 34). Without the bound: about 100.
  t.true(proxy.peakConnections <= QUICK_CONNECTIONS + 2, `${proxy.peakConnections} connections to the engine at once`);
  t.log(`100 status reads at once: at most ${proxy.peakConnections} connections to the engine at once`);

  // Node's own agent closes a connection idle for 5 s; the agent's are kept for the next call.
  const before = proxy.connectionsAccepted;
  const requestsBefore = proxy.requests.length;
  await new Promise((resolve) => setTimeout(resolve, 6_000));
  t.is((await status()).status, 200);
  // Other files' containers come and go on the same engine meanwhile: an inspection of one may come at once with the read.
  const others = proxy.requests.length - requestsBefore - 1;
  const opened = proxy.connectionsAccepted - before;
  t.true(opened <= others, `a read after 6 s idle opened ${opened} connections, beside ${others} other requests`);
});
