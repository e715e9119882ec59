import type { AddressInfo } from 'node:net';
import test from 'ava';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { BOT_LOG_SEND_MS, LOG_READS_IN_ALL, LOG_READS_PER_BOT, PLATFORM_LOG_READS } from '../../src/http/log-reads.js';
import { MAX_STREAMS_PER_BOT } from '../../src/http/stream-limits.js';
import { MAX_LOG_BYTES } from '../../src/runtime/log-tail.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { rawRequest } from '../helpers/raw-http.js';
import { SocketProxy } from '../helpers/socket-proxy.js';
import { openStream } from '../helpers/sse-client.js';

// What one hostile bot can do to the agent and to the bots beside it, tried against the real engine
// (issue 22): each bound below was missing before, and each test fails without it.
const fixture = new DockerFixture();
const proxy = new SocketProxy();
let agent: TestAgent;
let target: { host: string; port: number };

test.before(async () => {
  await fixture.ready();
  await proxy.start();
  // Two lifecycle operations a minute, for the bot and for the platform apart.
  // Its logs reads go to the engine, whose reads these tests bound (the agent's own reads of log files: test/docker/log-file.test.ts).
  agent = await startAgent(createDockerDriver({ dockerHost: proxy.dockerHost, logFiles: false }), { rateLimit: 2 }, '0.0.0.0');
  target = { host: (await fixture.network()).gateway, port: (agent.server.address() as AddressInfo).port };
});

test.after.always(async () => {
  await agent?.close();
  await proxy.close();
  await fixture.cleanup();
});

const lists = (): number => proxy.requests.filter((line) => /^GET \S*\/containers\/json/.test(line)).length;

test.serial('a bot that spends its lifecycle budget on itself leaves the platform its own: the platform still stops it', async (t) => {
  const bot = await fixture.runBot();
  const own = { method: 'POST', path: '/api/bots/start', body: { bot_id: bot.id, user_id: 'user_1' } };
  t.is((await fixture.httpFromBot(bot, target, own)).status, 200);
  t.is((await fixture.httpFromBot(bot, target, own)).status, 200);
  const third = await fixture.httpFromBot(bot, target, own);
  t.is(third.status, 429);
  t.regex(String(third.body?.msg), /too many lifecycle operations/);
  // Before, one budget served both: the platform's stop of a bot that spent it was a 429.
  const stop = await call(agent.server, '/api/bots/stop', { body: { bot_id: bot.id, user_id: 'user_1' } });
  t.is(stop.status, 200, stop.text);
  t.false(await fixture.running(bot));
});

test.serial('a container that is no bot costs at most one container list however often it calls (was one each)', async (t) => {
  const bot = await fixture.runBot();
  const stranger = await fixture.runBot({ labelled: false });
  await eventually(async () => (await call(agent.server, `/api/bots/${bot.id}`)).status === 200, 10_000, 100);
  const before = lists();
  for (let i = 0; i < 15; i += 1) {
    const reply = await fixture.httpFromBot(stranger, target, { method: 'GET', path: `/api/bots/${bot.id}/stats` });
    t.is(reply.status, 403);
  }
  // The answer for an address is kept 5 s: 15 calls in a few seconds take one list, two at a boundary.
  t.true(lists() - before <= 2, `${lists() - before} container lists for 15 calls`);
});

test.serial(`log followers and event streams of one bot share ${MAX_STREAMS_PER_BOT} places, each free again at once when its client leaves`, async (t) => {
  const bot = await fixture.runBot();
  const open = (i: number) =>
    openStream(agent.server, i % 2 === 0 ? `/api/bots/${bot.id}/logs?follow=true&lines=0` : `/api/bots/${bot.id}/events`);
  const streams = await Promise.all(Array.from({ length: MAX_STREAMS_PER_BOT }, (_, i) => open(i)));
  t.deepEqual(streams.map((s) => s.status), Array.from({ length: MAX_STREAMS_PER_BOT }, () => 200));
  // Before, event streams had no bound at all.
  for (const path of [`/api/bots/${bot.id}/events`, `/api/bots/${bot.id}/logs?follow=true`]) {
    const refused = await openStream(agent.server, path);
    t.is(refused.status, 429, path);
    t.regex(String(refused.body?.msg), /too many/);
  }
  // The bot is silent: nothing is written that would tell the agent its clients left.
  for (const stream of streams) stream.close();
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const again = await Promise.all(Array.from({ length: MAX_STREAMS_PER_BOT }, (_, i) => open(i)));
  t.deepEqual(again.map((s) => s.status), Array.from({ length: MAX_STREAMS_PER_BOT }, () => 200), 'a second after');
  for (const stream of again) stream.close();
});

test.serial(`at most ${LOG_READS_PER_BOT} logs reads of one bot reach the engine at once; the others wait their turn`, async (t) => {
  const bot = await fixture.runBot({ script: 'i=0; while [ $i -lt 3000 ]; do echo "line $i"; i=$((i+1)); done; sleep 1000' });
  await eventually(async () => (await call(agent.server, '/api/bots/logs', { body: { bot_id: bot.id, lines: 1 } })).body?.logs === 'line 2999\n', 10_000, 100);
  // This bot's reads alone: the agent also reads the last lines of other test files' bots as they exit.
  const logReads = (): number =>
    proxy.requests.filter((line) => line.includes(`/containers/${bot.id}/logs`) || line.includes(`/containers/${bot.container.id}/logs`)).length;
  proxy.delay(/\/logs\?/, 1_200);
  t.teardown(() => proxy.undelay());
  const before = logReads();
  // 250 lines: one engine call each (a read of more lines first asks for a few entries to learn their size).
  const reads = Array.from({ length: 8 }, () => call(agent.server, '/api/bots/logs', { body: { bot_id: bot.id, lines: 250 } }));
  await new Promise((resolve) => setTimeout(resolve, 600));
  t.is(logReads() - before, LOG_READS_PER_BOT, 'at once');
  const replies = await Promise.all(reads);
  t.deepEqual(replies.map((reply) => reply.status), Array.from({ length: 8 }, () => 200));
  t.true(replies.every((reply) => String(reply.body?.logs).startsWith('line 2750\n') && String(reply.body?.logs).endsWith('line 2999\n')));
});

test.serial('a 10,000-line read of a bot writing long lines asks the engine for about what an answer holds, not 10,000 entries', async (t) => {
  // 300 lines of 42,000 bytes: 900 log entries of up to 16 KiB, 12.6 MB; an answer holds the newest 4 MiB.
  const script = "i=0; while [ $i -lt 300 ]; do head -c 42000 /dev/zero | tr '\\000' a; echo; i=$((i+1)); done; echo done; sleep 1000";
  const bot = await fixture.runBot({ script });
  await eventually(async () => (await call(agent.server, '/api/bots/logs', { body: { bot_id: bot.id, lines: 1 } })).body?.logs === 'done\n', 30_000, 200);
  const before = proxy.requests.length;
  const reply = await call(agent.server, '/api/bots/logs', { body: { bot_id: bot.id, lines: 10_000 } });
  t.is(reply.status, 200);
  const logs = String(reply.body?.logs);
  t.true(logs.endsWith(`${'a'.repeat(42_000)}\ndone\n`));
  t.true(Buffer.byteLength(logs) <= MAX_LOG_BYTES && Buffer.byteLength(logs) > MAX_LOG_BYTES - 43_000, `${Buffer.byteLength(logs)} bytes`);
  // The engine reads and decodes every entry a tail asks for: before, this read asked it for 10,001.
  const tails = proxy.requests
    .slice(before)
    .filter((line) => line.includes(`/containers/${bot.container.id}/logs`))
    .map((line) => Number(/[?&]tail=(\d+)/.exec(line)?.[1]));
  t.log(`tails asked for: ${tails.join(', ')}`);
  t.true(tails.length > 0 && tails.reduce((sum, tail) => sum + tail, 0) <= 1_000, `tails asked for: ${tails.join(', ')}`);
});

test.serial('a crash-looping bot that prints control bytes keeps small exit records: status and exits stay bounded', async (t) => {
  // 100 lines of 42,000 \x01 bytes a run: 4.2 MB of text, 25 MB once escaped in JSON, every run.
  const script = "i=0; while [ $i -lt 100 ]; do head -c 42000 /dev/zero | tr '\\000' '\\001'; echo; i=$((i+1)); done; exit 3";
  const bot = await fixture.runBot({ script, restartPolicy: 'on-failure' });
  let exits: unknown[] = [];
  t.true(
    await eventually(async () => {
      exits = ((await call(agent.server, `/api/bots/${bot.id}/exits?limit=50`)).body?.exits as unknown[]) ?? [];
      return exits.length >= 3;
    }, 60_000, 500),
    `${exits.length} exit records`,
  );
  const all = await call(agent.server, `/api/bots/${bot.id}/exits?limit=50`);
  const records = all.body?.exits as Array<{ logs: string; exit_code: number }>;
  t.true(records.every((record) => record.exit_code === 3));
  // Each record keeps at most 64 KiB as answered (newest lines), so 50 of them at most about 3.2 MB.
  t.true(Buffer.byteLength(all.text) <= records.length * 70 * 1024, `${Buffer.byteLength(all.text)} bytes for ${records.length} records`);
  t.true(records.every((record) => record.logs.length > 0 && record.logs.endsWith('\u0001\n')), 'the newest lines are kept');
  const status = await call(agent.server, `/api/bots/${bot.id}`);
  t.is(status.status, 200);
  t.true(Buffer.byteLength(status.text) <= 70 * 1024, `a status of ${Buffer.byteLength(status.text)} bytes`);
});

/**
 * A bot that prints 100 lines of 42,000 control bytes (25 MB once in JSON), then asks for its own 1,000 last lines
 * `reads` times at once and never takes the answers (nc's output goes to a pipe nobody reads).
 */
const NEVER_READS = `
i=0; while [ $i -lt 100 ]; do head -c 42000 /dev/zero | tr '\\000' '\\001'; echo; i=$((i+1)); done
sleep 1
k=0; while [ $k -lt "$4" ]; do (printf '%s' "$3"; sleep 120) | nc "$1" "$2" | sleep 120 & k=$((k+1)); done
exec sleep 1000`;

test.serial(`two bots that never take their logs answers hold at most ${LOG_READS_IN_ALL - PLATFORM_LOG_READS} places: the platform still reads, and each place is free again within ${BOT_LOG_SEND_MS / 1000} s`, async (t) => {
  const hog = async (reads: number) => {
    const id = fixture.newBotId();
    const request = rawRequest({ method: 'POST', path: '/api/bots/logs', body: { bot_id: id, lines: 1_000 } });
    return fixture.runBot({ id, script: NEVER_READS, args: [target.host, String(target.port), request, String(reads)] });
  };
  const quiet = await fixture.runBot({ script: 'echo hello; sleep 1000' });
  // Before, the two took all 6 places (4 and 2) until each answer had left or 30 s passed.
  await Promise.all([hog(LOG_READS_PER_BOT), hog(LOG_READS_PER_BOT)]);
  // Once they hold their places (their 25 MB answers stuck in sockets nobody reads): the platform reads another bot.
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  const platform = await Promise.all(
    Array.from({ length: PLATFORM_LOG_READS }, () => call(agent.server, '/api/bots/logs', { body: { bot_id: quiet.id, lines: 10 } })),
  );
  t.deepEqual(platform.map((reply) => reply.status), Array.from({ length: PLATFORM_LOG_READS }, () => 200));
  t.is(platform[0]?.body?.logs, 'hello\n');
  // A third bot's own read is answered once the stuck answers are cut off.
  const reader = await fixture.runBot({ script: 'echo mine; sleep 1000' });
  const own = { method: 'POST', path: '/api/bots/logs', body: { bot_id: reader.id, lines: 1 } };
  t.true(await eventually(async () => (await fixture.httpFromBot(reader, target, own)).status === 200, BOT_LOG_SEND_MS + 5_000, 500));
});
