import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import { MAX_STREAMS as MAX_FOLLOWERS, MAX_STREAMS_PER_BOT as MAX_FOLLOWERS_PER_BOT } from '../../src/http/stream-limits.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { MemoryDriver } from '../helpers/memory-driver.js';
import { openStream } from '../helpers/sse-client.js';

// Events and live logs over HTTP (docs/api.md §§9-10): who may read them, resuming, and the limits.

const SELF = { id: 'bot_1_1_self', address: '127.0.0.7' };
const OTHER = { id: 'bot_2_2_other', address: '127.0.0.8' };

async function setUp(t: { teardown(fn: () => Promise<void>): void }): Promise<{ driver: MemoryDriver; agent: TestAgent }> {
  const driver = new MemoryDriver();
  driver.add({ ...SELF, logLines: ['one', 'two', 'three'] });
  driver.add({ ...OTHER, ownerId: 'user_2', logLines: ['secret of the other bot'] });
  const agent = await startAgent(driver);
  t.teardown(agent.close);
  return { driver, agent };
}

/** A run of `botId` that ends by itself with `exitCode`, reported as a runtime would. */
function crash(driver: MemoryDriver, botId: string, exitCode: number, at = new Date()): void {
  driver.observer?.ended({ botId, at, exitCode, oomKilled: false, requested: false, startedAt: new Date(at.getTime() - 1000), logs: 'boom\n', key: `${botId}:${at.getTime()}:${Math.random()}` });
}

test('a bot reads its own events; another bot is refused 403; every bot\'s events are the platform\'s alone', async (t) => {
  const { agent } = await setUp(t);
  const own = await openStream(agent.server, `/api/bots/${SELF.id}/events`, { from: SELF.address });
  t.is(own.status, 200);
  t.regex(String(own.headers['content-type']), /^text\/event-stream/);
  own.close();
  const other = await openStream(agent.server, `/api/bots/${OTHER.id}/events`, { from: SELF.address });
  t.is(other.status, 403);
  t.like(other.body, { ok: false, msg: 'a bot may manage only itself' });
  const all = await openStream(agent.server, '/api/events', { from: SELF.address });
  t.is(all.status, 403);
  t.regex(String(all.body?.msg), /forbidden/);
  const logs = await openStream(agent.server, `/api/bots/${OTHER.id}/logs?follow=true`, { from: SELF.address });
  t.is(logs.status, 403);
  t.like(await call(agent.server, `/api/bots/${OTHER.id}`, { from: SELF.address }), { status: 403 });
  t.like(await call(agent.server, `/api/bots/${OTHER.id}/exits`, { from: SELF.address }), { status: 403 });
  t.like(await call(agent.server, `/api/bots/${SELF.id}/exits`, { from: SELF.address }), { status: 200, body: { ok: true, exits: [] } });
  const platform = await openStream(agent.server, '/api/events');
  t.is(platform.status, 200);
  platform.close();
});

test('without a cursor only live events come; with one, exactly those after it, then live ones', async (t) => {
  const { driver, agent } = await setUp(t);
  crash(driver, SELF.id, 1);
  crash(driver, OTHER.id, 2);
  const all = await openStream(agent.server, '/api/events');
  crash(driver, SELF.id, 3);
  const live = await all.next((e) => e.event === 'exited');
  t.like(live.data, { bot_id: SELF.id, exit: { exit_code: 3, signal: null, requested: false } });
  t.is(all.events.length, 1, 'nothing before the stream opened');

  const cursor = live.id!;
  crash(driver, OTHER.id, 4);
  crash(driver, SELF.id, 5);
  const resumed = await openStream(agent.server, '/api/events', { headers: { 'Last-Event-ID': cursor } });
  await resumed.next((e) => e.event === 'crash-looping');
  t.deepEqual(
    resumed.events.map((e) => [e.event, e.data.bot_id, (e.data.exit as { exit_code: number } | undefined)?.exit_code]),
    [
      ['exited', OTHER.id, 4],
      ['exited', SELF.id, 5],
      ['crash-looping', SELF.id, undefined],
    ],
  );
  const ofSelf = await openStream(agent.server, `/api/bots/${SELF.id}/events?after=0`);
  await ofSelf.next((e) => e.event === 'exited' && (e.data.exit as { exit_code: number }).exit_code === 5);
  t.deepEqual(
    ofSelf.events.filter((e) => e.event === 'exited').map((e) => (e.data.exit as { exit_code: number }).exit_code),
    [1, 3, 5],
  );
  t.true(ofSelf.events.some((e) => e.event === 'crash-looping'), 'three crashes within ten minutes');
  crash(driver, SELF.id, 6);
  await ofSelf.next((e) => e.event === 'exited' && (e.data.exit as { exit_code: number }).exit_code === 6);
  const ids = ofSelf.events.map((e) => Number(e.id));
  t.deepEqual(ids, [...new Set(ids)].sort((a, b) => a - b), 'no event twice, in order');
  for (const stream of [all, resumed, ofSelf]) stream.close();

  // An empty Last-Event-ID is none, as /openapi.json says: live events only.
  const empty = await openStream(agent.server, '/api/events', { headers: { 'Last-Event-ID': '' } });
  t.is(empty.status, 200);
  crash(driver, OTHER.id, 7);
  await empty.next((e) => e.event === 'exited');
  t.deepEqual(empty.events.filter((e) => e.event === 'exited').map((e) => (e.data.exit as { exit_code: number }).exit_code), [7]);
  empty.close();

  const bad = await openStream(agent.server, '/api/events', { headers: { 'Last-Event-ID': 'yesterday' } });
  t.is(bad.status, 400);
  t.regex(String(bad.body?.msg), /Last-Event-ID/);
});

test('live logs: the last lines, then each new one, an exited event when the run ends', async (t) => {
  const { driver, agent } = await setUp(t);
  const follower = await openStream(agent.server, `/api/bots/${SELF.id}/logs?follow=true&lines=2`, { from: SELF.address });
  t.is(follower.status, 200);
  await follower.next((e) => e.data.line === 'three');
  driver.write(SELF.id, 'four');
  await follower.next((e) => e.data.line === 'four');
  t.deepEqual(
    follower.events.map((e) => [e.event, e.data.line, e.data.stream]),
    [
      ['log', 'two', 'stdout'],
      ['log', 'three', 'stdout'],
      ['log', 'four', 'stdout'],
    ],
  );
  t.regex(String(follower.events[2]!.data.at), /^\d{4}-\d\d-\d\dT/);
  driver.endRun(SELF.id);
  crash(driver, SELF.id, 9);
  const exited = await follower.next((e) => e.event === 'exited');
  t.like(exited.data, { bot_id: SELF.id, exit: { exit_code: 9 } });
  follower.close();
});

// Under load the runtime may tell of a run's start only after a follower began reading that run.
test("live logs: a run's start told late is not taken for the next run; the next run's lines come after the exited event", async (t) => {
  const driver = new MemoryDriver();
  const startedAt = new Date(Date.now() - 300);
  driver.add({ ...SELF, logLines: ['one'], startedAt });
  const agent = await startAgent(driver);
  t.teardown(agent.close);
  const follower = await openStream(agent.server, `/api/bots/${SELF.id}/logs?follow=true`, { from: SELF.address });
  await follower.next((e) => e.data.line === 'one');
  await driver.observer?.started({ botId: SELF.id, startedAt, key: `${SELF.id}:run-1` });
  // A restart: the run ends, the next begins and writes at once; the runtime records the end, then the start.
  driver.endRun(SELF.id);
  const endedAt = new Date();
  Object.assign(driver.bots.get(SELF.id)!, { running: true, startedAt: new Date(endedAt.getTime() + 5) });
  await new Promise((resolve) => setImmediate(resolve));
  driver.write(SELF.id, 'next run', new Date(endedAt.getTime() + 10));
  // The end is recorded a moment later (a record waits for the run's last lines).
  await new Promise((resolve) => setTimeout(resolve, 300));
  await driver.observer?.ended({ botId: SELF.id, at: endedAt, exitCode: 0, oomKilled: false, requested: true, startedAt, logs: 'one\n', key: `${SELF.id}:end-1` });
  await driver.observer?.started({ botId: SELF.id, startedAt: new Date(endedAt.getTime() + 5), key: `${SELF.id}:run-2` });
  await follower.next((e) => e.data.line === 'next run');
  t.deepEqual(
    follower.events.map((e) => (e.event === 'log' ? e.data.line : e.event)),
    ['one', 'exited', 'next run'],
  );
  follower.close();
});

test(`at most ${MAX_FOLLOWERS_PER_BOT} followers of one bot and ${MAX_FOLLOWERS} in all: 429 past that; a place is free again once one leaves`, async (t) => {
  const { driver, agent } = await setUp(t);
  const ofSelf = await Promise.all(Array.from({ length: MAX_FOLLOWERS_PER_BOT }, () => openStream(agent.server, `/api/bots/${SELF.id}/logs?follow=true`)));
  t.true(ofSelf.every((stream) => stream.status === 200));
  const refused = await openStream(agent.server, `/api/bots/${SELF.id}/logs?follow=true`);
  t.is(refused.status, 429);
  t.regex(String(refused.body?.msg), /too many/);
  t.truthy(refused.headers['retry-after']);
  ofSelf[0]!.close();
  t.true(await eventually(async () => (await openStream(agent.server, `/api/bots/${SELF.id}/logs?follow=true`)).status === 200));

  const others = Array.from({ length: 20 }, (_, i) => driver.add({ id: `bot_3_${i}_many`, logLines: [] }).id);
  const streams = await Promise.all(
    others.flatMap((id) => Array.from({ length: MAX_FOLLOWERS_PER_BOT }, () => openStream(agent.server, `/api/bots/${id}/logs?follow=true`))),
  );
  const answered = streams.map((stream) => stream.status);
  t.is(answered.filter((status) => status === 200).length, MAX_FOLLOWERS - MAX_FOLLOWERS_PER_BOT);
  t.is(answered.filter((status) => status === 429).length, 20 * MAX_FOLLOWERS_PER_BOT - (MAX_FOLLOWERS - MAX_FOLLOWERS_PER_BOT));
  for (const stream of [...ofSelf, ...streams]) stream.close();
});

test('a follower that does not read is cut off once 1 MiB waits for it; another follower keeps streaming', async (t) => {
  const { driver, agent } = await setUp(t);
  // A client that sends its request and never reads a byte.
  const stalled = connect((agent.server.address() as AddressInfo).port, '127.0.0.1');
  stalled.write(`GET /api/bots/${SELF.id}/logs?follow=true&lines=0 HTTP/1.1\r\nHost: localhost\r\n\r\n`);
  stalled.pause();
  const closed = new Promise<void>((resolve) => {
    stalled.on('close', () => resolve());
    stalled.on('error', () => undefined);
  });
  const reader = await openStream(agent.server, `/api/bots/${SELF.id}/logs?follow=true&lines=0`);
  const line = 'x'.repeat(16 * 1024);
  let written = 0;
  let cut = false;
  void closed.then(() => (cut = true));
  // Far more than 1 MiB plus what the kernel's socket buffers hold.
  while (!cut && written < 256 * 1024 * 1024) {
    driver.write(SELF.id, line);
    written += line.length;
    // Small steps, so that the reading follower keeps up while the other's unread bytes pile up.
    if (written % (256 * 1024) === 0) {
      // Once the agent has dropped the connection, these bytes are refused and the socket closes.
      stalled.write('\r\n');
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }
  await closed;
  t.true(cut, 'the stalled follower was disconnected');
  driver.write(SELF.id, 'still here');
  await reader.next((e) => e.data.line === 'still here');
  t.true(written < 64 * 1024 * 1024, `cut off after ${written} bytes`);
  reader.close();
});

test('GET /api/bots/{id}: state and crashes from the records; a stop through the agent ends crash-looping', async (t) => {
  const { driver, agent } = await setUp(t);
  t.like(await call(agent.server, `/api/bots/${SELF.id}`), {
    status: 200,
    body: { ok: true, bot: { bot_id: SELF.id, user_id: 'user_1', state: 'running', crashes_last_hour: 0, last_exit: null, uptime: '1h 2m' } },
  });
  for (const code of [1, 2, 3]) crash(driver, SELF.id, code);
  const status = await call(agent.server, `/api/bots/${SELF.id}`);
  t.like(status.body?.bot, { state: 'crash-looping', crashes_last_hour: 3, last_exit: { exit_code: 3, logs: 'boom\n', requested: false } });
  const metrics = (await call(agent.server, '/metrics')).text;
  t.regex(metrics, /^bot_agent_bot_exits_total\{oom="false",requested="false"\} 3$/m);
  t.regex(metrics, /^bot_agent_crash_looping_bots 1$/m);
  t.regex(metrics, /^bot_agent_indexed_bots 2$/m);
  t.is((await call(agent.server, '/api/bots/stop', { body: { bot_id: SELF.id, user_id: 'user_1' } })).status, 200);
  t.like((await call(agent.server, `/api/bots/${SELF.id}`)).body?.bot, { state: 'exited' });
  t.like((await call(agent.server, `/api/bots/${SELF.id}/exits?limit=2`)).body, { ok: true, exits: [{ exit_code: 3 }, { exit_code: 2 }] });
});
