import type { TestFn } from 'ava';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import type { RuntimeHarness } from './runtime-harness.js';

/**
 * What a user sees of the agent whatever the runtime: registered on `test`
 * against the harness that `harness()` returns once set up.
 */
export function botBehaviours(test: TestFn, harness: () => RuntimeHarness): void {
  const owned = (id: string) => ({ bot_id: id, user_id: 'user_1' });

  test('restart restarts the bot: it runs again, started anew', async (t) => {
    const h = harness();
    const bot = await h.createBot();
    const before = await h.runId(bot);
    const reply = await call(h.agent, '/api/bots/restart', { body: owned(bot.id) });
    t.is(reply.status, 200, reply.text);
    t.like(reply.body, { ok: true, message: `Bot ${bot.id} restarted` });
    t.not(await h.runId(bot), before);
    t.true(await h.running(bot));
  });

  test('restart of a stopped bot is a 409 and leaves it stopped', async (t) => {
    const h = harness();
    const bot = await h.createBot({ running: false });
    const reply = await call(h.agent, '/api/bots/restart', { body: owned(bot.id) });
    t.is(reply.status, 409);
    t.regex(String(reply.body?.msg), /container not found.*must be running/);
    t.false(await h.running(bot));
  });

  test('stop and start change the bot state and are idempotent', async (t) => {
    const h = harness();
    const bot = await h.createBot();
    const stop = () => call(h.agent, '/api/bots/stop', { body: owned(bot.id) });
    const start = () => call(h.agent, '/api/bots/start', { body: owned(bot.id) });
    t.like(await stop(), { status: 200, body: { ok: true, message: `Bot ${bot.id} stopped` } });
    t.false(await h.running(bot));
    t.like(await stop(), { status: 200, body: { ok: true, message: `Bot ${bot.id} was already stopped` } });
    t.like(await start(), { status: 200, body: { ok: true, message: `Bot ${bot.id} started` } });
    t.true(await h.running(bot));
    t.like(await start(), { status: 200, body: { ok: true, message: `Bot ${bot.id} was already running` } });
  });

  test('a user_id that does not own the bot is a 403, and the bot is untouched', async (t) => {
    const h = harness();
    const bot = await h.createBot({ owner: 'user_77' });
    const before = await h.runId(bot);
    for (const route of ['restart', 'stop', 'start']) {
      const reply = await call(h.agent, `/api/bots/${route}`, { body: owned(bot.id) });
      t.is(reply.status, 403, route);
      t.regex(String(reply.body?.msg), /user_id/);
    }
    t.is(await h.runId(bot), before);
    t.is((await call(h.agent, '/api/bots/stop', { body: { bot_id: bot.id, user_id: 'user_77' } })).status, 200);
  });

  test('logs return exactly the last lines, 100 by default', async (t) => {
    const h = harness();
    const bot = await h.createBot({ logLines: Array.from({ length: 150 }, (_, i) => `line ${i + 1}`) });
    const ask = (lines?: number) => call(h.agent, '/api/bots/logs', { body: { bot_id: bot.id, lines } });
    t.true(await eventually(async () => (await ask(1)).body?.logs === 'line 150\n'), 'the bot never printed its last line');
    t.like(await ask(3), { status: 200, body: { ok: true, logs: 'line 148\nline 149\nline 150\n' } });
    const all = String((await ask()).body?.logs).trimEnd().split('\n');
    t.is(all.length, 100);
    t.is(all[0], 'line 51');
  });

  test('logs within a window: since keeps the lines written after it, until those up to it, lines the last of them', async (t) => {
    const h = harness();
    const bot = await h.createBot({ logLines: ['early', 'middle', 'late'], paced: true });
    const ask = async (query: string) => {
      const reply = await call(h.agent, `/api/bots/${bot.id}/logs?${query}`);
      t.is(reply.status, 200, reply.text);
      return String(reply.body?.logs);
    };
    let all = '';
    t.true(await eventually(async () => /^late \d+$/m.test((all = await ask('lines=10'))), 60_000, 250), `the bot never printed its last line: ${all}`);
    // Each line was printed in the second it names, and the next two seconds later: half past the second after
    // one line's own lies after its runtime stamp and before the next line's.
    const secondOf = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(all)?.[1]);
    const after = (name: string) => new Date((secondOf(name) + 1.5) * 1000).toISOString();
    const names = (text: string) => text.split('\n').filter(Boolean).map((line) => line.split(' ')[0]);
    t.deepEqual(names(await ask(`since=${after('early')}`)), ['middle', 'late']);
    t.deepEqual(names(await ask(`until=${after('early')}`)), ['early']);
    t.deepEqual(names(await ask(`since=${after('early')}&until=${after('middle')}`)), ['middle']);
    t.deepEqual(names(await ask(`since=${after('early')}&lines=1`)), ['late']);
    t.deepEqual(names(await ask(`since=${after('late')}`)), []);
    const posted = await call(h.agent, '/api/bots/logs', { body: { bot_id: bot.id, until: after('middle'), lines: 1 } });
    t.deepEqual(names(String(posted.body?.logs)), ['middle']);
  });

  test('stats have the seed fields and types', async (t) => {
    const h = harness();
    const bot = await h.createBot();
    const reply = await call(h.agent, `/api/bots/${bot.id}/stats`);
    t.is(reply.status, 200, reply.text);
    const stats = reply.body?.stats as Record<string, unknown>;
    t.is(typeof stats.cpu_percent, 'number');
    t.is(typeof stats.memory_percent, 'number');
    t.regex(String(stats.memory_usage), /^\d+\.\d\d MB$/);
    t.regex(String(stats.uptime), /^\d+h \d+m$/);
  });

  test('stats of a stopped bot are a 409', async (t) => {
    const h = harness();
    const bot = await h.createBot({ running: false });
    const reply = await call(h.agent, `/api/bots/${bot.id}/stats`);
    t.is(reply.status, 409);
    t.regex(String(reply.body?.msg), /must be running/);
  });

  test('an unknown bot is a 404 for every operation', async (t) => {
    const h = harness();
    const id = h.newBotId();
    for (const [path, body] of [
      ['/api/bots/restart', owned(id)],
      ['/api/bots/stop', owned(id)],
      ['/api/bots/start', owned(id)],
      ['/api/bots/logs', { bot_id: id }],
      [`/api/bots/${id}/stats`, undefined],
    ] as const) {
      const reply = await call(h.agent, path, { body });
      t.is(reply.status, 404, path);
      t.regex(String(reply.body?.msg), /container not found/, path);
    }
  });

  test('a unit without the bot label is never touched, even when named like a bot', async (t) => {
    const h = harness();
    const stranger = await h.createBot({ labelled: false });
    const before = await h.runId(stranger);
    for (const route of ['restart', 'stop', 'start']) {
      t.is((await call(h.agent, `/api/bots/${route}`, { body: owned(stranger.id) })).status, 404, route);
    }
    t.true(await h.running(stranger));
    t.is(await h.runId(stranger), before);
  });

  test('parallel restarts of one bot are one restart in the runtime', async (t) => {
    const h = harness();
    // "At once" is while one is under way (docs/api.md §2): a bot that takes its grace period to stop keeps the
    // first restart going until every request has arrived, however loaded the machine (a bot that stops at once
    // let a busy one finish the first before it had read the fifth request).
    const bot = await h.createBot({ slowRestartMs: 1500 });
    const replies = await Promise.all(
      Array.from({ length: 5 }, () => call(h.agent, '/api/bots/restart', { body: owned(bot.id) })),
    );
    for (const reply of replies) t.like(reply, { status: 200, body: { ok: true } });
    t.is(await h.restartCount(bot), 1);
  });

  test('restarts one after another each restart the bot', async (t) => {
    const h = harness();
    const bot = await h.createBot();
    for (let i = 0; i < 2; i++) t.is((await call(h.agent, '/api/bots/restart', { body: owned(bot.id) })).status, 200);
    t.is(await h.restartCount(bot), 2);
  });

  test('a restart slower than the time-out is a 504, and the restart still completes', async (t) => {
    const h = harness();
    const agent = await h.agentWithRestartTimeout(200);
    const bot = await h.createBot({ slowRestartMs: 1500 });
    const before = await h.runId(bot);
    const reply = await call(agent, '/api/bots/restart', { body: owned(bot.id) });
    t.is(reply.status, 504, reply.text);
    t.regex(String(reply.body?.msg), /timeout during restart/);
    t.true(await eventually(async () => (await h.runId(bot)) !== before && (await h.running(bot))));
  });

  test('an unreachable runtime is a 503 and /readyz says not ready', async (t) => {
    const h = harness();
    const agent = await h.unreachableAgent();
    const ready = await call(agent, '/readyz');
    t.is(ready.status, 503);
    t.regex(String(ready.body?.msg), /runtime unavailable/);
    const reply = await call(agent, '/api/bots/restart', { body: owned('bot_1_1_a') });
    t.is(reply.status, 503);
    t.like(reply.body, { ok: false });
    // The reachable agent is ready: on a cluster busy with other test files one probe may miss its 1.5 s deadline, so it is asked again.
    t.true(await eventually(async () => (await call(h.agent, '/readyz')).status === 200, 15_000, 250), 'the reachable agent is ready');
  });

  test('a bot calling from its own address reads its own logs and stats', async (t) => {
    const h = harness();
    const bot = await h.createBot({ logLines: ['hello from inside'] });
    t.true(await eventually(async () => (await call(h.agent, '/api/bots/logs', { body: { bot_id: bot.id } })).body?.logs === 'hello from inside\n'));
    const logs = await h.callFromBot(bot, { method: 'POST', path: '/api/bots/logs', body: { bot_id: bot.id } });
    t.like(logs, { status: 200, body: { ok: true, logs: 'hello from inside\n' } });
    const stats = await h.callFromBot(bot, { method: 'GET', path: `/api/bots/${bot.id}/stats` });
    t.is(stats.status, 200, stats.raw);
  });

  test('self restart from a bot without a header restarts the caller, which hears back first', async (t) => {
    const h = harness();
    const bot = await h.createBot();
    const before = await h.runId(bot);
    const reply = await h.callFromBot(bot, { method: 'POST', path: '/api/bots/self/restart' });
    t.is(reply.status, 200, reply.raw);
    t.like(reply.body, { ok: true });
    t.regex(String(reply.body?.message), new RegExp(bot.id));
    t.true(await eventually(async () => (await h.runId(bot)) !== before && (await h.running(bot))));
  });

  test('a bot naming another bot in a header, body or path is a 403 and the other is untouched', async (t) => {
    const h = harness();
    const [bot, other] = await Promise.all([h.createBot(), h.createBot()]);
    const before = await h.runId(other);
    for (const attempt of [
      { method: 'POST', path: '/api/bots/self/restart', headers: { 'X-Bot-ID': other.id } },
      { method: 'POST', path: '/api/bots/restart', body: owned(other.id) },
      { method: 'POST', path: '/api/bots/stop', body: owned(other.id) },
      { method: 'POST', path: '/api/bots/logs', body: { bot_id: other.id } },
      { method: 'GET', path: `/api/bots/${other.id}/stats` },
    ]) {
      const reply = await h.callFromBot(bot, attempt);
      t.is(reply.status, 403, `${attempt.path}: ${reply.raw}`);
      t.regex(String(reply.body?.msg), /a bot may manage only itself/);
    }
    t.true(await h.running(other));
    t.is(await h.runId(other), before);
  });
}
