import test from 'ava';
import type { AddressInfo } from 'node:net';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';

// Bots call the agent from inside their own containers, as they do on a host:
// the agent listens on all addresses and bots reach it through their network's gateway.
const fixture = new DockerFixture();
let agent: TestAgent;
let target: { host: string; port: number };

test.before(async () => {
  await fixture.ready();
  agent = await startAgent(createDockerDriver({ dockerHost: fixture.dockerHost }), {}, '0.0.0.0');
  target = { host: (await fixture.network()).gateway, port: (agent.server.address() as AddressInfo).port };
});

test.after.always(async () => {
  await agent?.close();
  await fixture.cleanup();
});

test('a bot is known by its address: it reads its own logs and stats', async (t) => {
  const bot = await fixture.runBot({ script: `echo hello from inside; ${'exec sleep 1000'}` });
  const logs = await fixture.httpFromBot(bot, target, { method: 'POST', path: '/api/bots/logs', body: { bot_id: bot.id } });
  t.is(logs.status, 200, logs.raw);
  t.like(logs.body, { ok: true, logs: 'hello from inside\n' });
  const stats = await fixture.httpFromBot(bot, target, { method: 'GET', path: `/api/bots/${bot.id}/stats` });
  t.is(stats.status, 200, stats.raw);
  t.is(stats.body?.ok, true);
});

test('self restart without a header restarts the caller, which hears back first', async (t) => {
  const bot = await fixture.runBot();
  const before = await fixture.startedAt(bot);
  const reply = await fixture.httpFromBot(bot, target, { method: 'POST', path: '/api/bots/self/restart' });
  t.is(reply.status, 200, reply.raw);
  t.like(reply.body, { ok: true });
  t.regex(String(reply.body?.message), new RegExp(bot.id));
  t.true(await eventually(async () => (await fixture.startedAt(bot)) !== before && (await fixture.running(bot))));
});

test('a bot naming another bot in a header, body or path is refused and the other is untouched', async (t) => {
  const [bot, other] = await Promise.all([fixture.runBot(), fixture.runBot()]);
  const otherStart = await fixture.startedAt(other);
  const attempts = [
    { method: 'POST', path: '/api/bots/self/restart', headers: { 'X-Bot-ID': other.id } },
    { method: 'POST', path: '/api/bots/restart', body: { bot_id: other.id, user_id: 'user_1' } },
    { method: 'POST', path: '/api/bots/stop', body: { bot_id: other.id, user_id: 'user_1' } },
    { method: 'POST', path: '/api/bots/logs', body: { bot_id: other.id } },
    { method: 'GET', path: `/api/bots/${other.id}/stats` },
  ];
  for (const attempt of attempts) {
    const reply = await fixture.httpFromBot(bot, target, attempt);
    t.is(reply.status, 403, `${attempt.path}: ${reply.raw}`);
    t.regex(String(reply.body?.msg), /a bot may manage only itself/);
  }
  t.true(await fixture.running(other));
  t.is(await fixture.startedAt(other), otherStart);
});

test('a container without the bot label is refused', async (t) => {
  const [stranger, bot] = await Promise.all([fixture.runBot({ labelled: false }), fixture.runBot()]);
  const botStart = await fixture.startedAt(bot);
  const self = await fixture.httpFromBot(stranger, target, { method: 'POST', path: '/api/bots/self/restart' });
  t.is(self.status, 403, self.raw);
  t.regex(String(self.body?.msg), /forbidden/);
  const named = await fixture.httpFromBot(stranger, target, {
    method: 'POST',
    path: '/api/bots/restart',
    body: { bot_id: bot.id, user_id: 'user_1' },
  });
  t.is(named.status, 403, named.raw);
  t.is(await fixture.startedAt(bot), botStart);
});
