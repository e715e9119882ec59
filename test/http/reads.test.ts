import test from 'ava';
import { agentFor, startAgent } from '../helpers/agent.js';
import { call } from '../helpers/http-client.js';
import { MemoryDriver } from '../helpers/memory-driver.js';

// Reads of logs and stats: GET logs as POST's twin, and the per-bot read rate (docs/api.md §2).
const SELF = { id: 'bot_1_1_self', address: '127.0.0.7' };

async function setUp(t: Parameters<typeof agentFor>[0], readRate = 20) {
  const driver = new MemoryDriver();
  driver.add({ ...SELF, logLines: ['one', 'two', 'three'] });
  return { driver, server: await agentFor(t, driver, { readRate }) };
}

test('GET logs answers as POST logs does; lines=0 answers none without a runtime call', async (t) => {
  const { driver, server } = await setUp(t);
  t.like(await call(server, `/api/bots/${SELF.id}/logs?lines=2`), { status: 200, body: { ok: true, logs: 'two\nthree\n' } });
  t.like(await call(server, `/api/bots/${SELF.id}/logs`), { status: 200, body: { ok: true, logs: 'one\ntwo\nthree\n' } });
  t.like(await call(server, `/api/bots/${SELF.id}/logs?follow=false`), { status: 200, body: { logs: 'one\ntwo\nthree\n' } });
  const calls = driver.calls.length;
  t.like(await call(server, `/api/bots/${SELF.id}/logs?lines=0`), { status: 200, body: { ok: true, logs: '' } });
  t.is(driver.calls.length, calls);
});

test('GET logs refuses a bad lines or follow with a 400 naming it', async (t) => {
  const { driver, server } = await setUp(t);
  for (const query of ['lines=-1', 'lines=10001', 'lines=1.5', 'lines=abc', 'lines=', 'lines=1e3', 'lines=1&lines=2', 'follow=yes']) {
    const reply = await call(server, `/api/bots/${SELF.id}/logs?${query}`);
    t.is(reply.status, 400, query);
    t.regex(String(reply.body?.msg), query.startsWith('follow') ? /follow/ : /lines must be a whole number from 0 to 10000/, query);
  }
  t.deepEqual(driver.calls, []);
});

test('a query parameter a path does not take is a 400 naming it, not silently ignored', async (t) => {
  const { driver, server } = await setUp(t);
  for (const [path, known] of [
    [`/api/bots/${SELF.id}/logs?lines=2&limt=5`, /limt.*lines, follow/],
    [`/api/bots/${SELF.id}/exits?limt=5`, /limt.*limit/],
    [`/api/events?afterr=3`, /afterr.*after/],
    ['/api/admin/bots?owner=user_1', /owner.*user_id/],
  ] as const) {
    const reply = await call(server, path);
    t.is(reply.status, 400, path);
    t.regex(String(reply.body?.msg), /unknown query parameter/, path);
    t.regex(String(reply.body?.msg), known, path);
  }
  t.deepEqual(driver.calls, []);
});

test('a bot reading itself past its read rate gets 429 with Retry-After; the platform is not limited', async (t) => {
  // One read a second: the burst's reads, however slow on a loaded machine, end before a token comes back.
  const { server } = await setUp(t, 1);
  const reads = [
    () => call(server, '/api/bots/logs', { body: { bot_id: SELF.id }, from: SELF.address }),
    () => call(server, `/api/bots/${SELF.id}/logs`, { from: SELF.address }),
    () => call(server, `/api/bots/${SELF.id}/stats`, { from: SELF.address }),
  ];
  // A burst of twice the rate passes, whichever reads make it up.
  for (let i = 0; i < 2; i += 1) t.is((await reads[i % 3]!()).status, 200, `read ${i + 1}`);
  // Over the limit at once, by every path; each 429 comes when its Retry-After has passed.
  const started = Date.now();
  const refused = await Promise.all(reads.map((read) => read()));
  for (const reply of refused) {
    t.is(reply.status, 429);
    t.regex(String(reply.body?.msg), /too many reads/);
    t.is(reply.headers['retry-after'], '1');
  }
  t.true(Date.now() - started >= 990, 'a refusal was not held back');
  for (let i = 0; i < 30; i += 1) t.is((await call(server, `/api/bots/${SELF.id}/logs`)).status, 200, 'the platform was limited');
});

test("a bot's logs read of many lines counts as one read for each started 1,000", async (t) => {
  const { server } = await setUp(t, 20);
  const big = () => call(server, '/api/bots/logs', { body: { bot_id: SELF.id, lines: 10_000 }, from: SELF.address });
  for (let i = 0; i < 4; i += 1) t.is((await big()).status, 200, `read ${i + 1}`);
  t.is((await big()).status, 429);
});

test('a flood of heartbeats from one bot: past its read rate each is a 429, it holds one entry, and no runtime call is made for any', async (t) => {
  const driver = new MemoryDriver();
  driver.add({ ...SELF });
  const started = await startAgent(driver, { readRate: 5 });
  t.teardown(started.close);
  const sentAt = Date.now();
  const beat = async () => ({ ...(await call(started.server, '/api/bots/self/heartbeat', { body: { ttl_s: 30 }, from: SELF.address })), at: Date.now() });
  const replies = await Promise.all(Array.from({ length: 50 }, beat));
  const taken = replies.filter((reply) => reply.status === 200);
  // A full bucket of 10, and 5 more a second for as long as the beats took to be counted: each was counted
  // after the first was sent and before its 200 came back (a slow machine spreads the 50 out).
  const countedForS = (Math.max(...taken.map((reply) => reply.at)) - sentAt) / 1000;
  const most = 10 + Math.floor(5 * countedForS);
  t.true(taken.length >= 10 && taken.length <= most, `${taken.length} beats taken at once with a rate of 5 a second (bursts of 10); at most ${most} in ${countedForS} s`);
  for (const reply of replies.filter((reply) => reply.status !== 200)) {
    t.is(reply.status, 429);
    t.regex(String(reply.body?.msg), /too many reads/);
  }
  t.is(started.heartbeats.size, 1);
  t.deepEqual(driver.calls.filter((call) => !call.startsWith('botAtAddress')), [], 'a beat asks the runtime nothing but who calls');
  // Bad input is a 400 that names it, before anything else.
  for (const body of [{ ttl_s: 4 }, { ttl_s: 3601 }, { ttl_s: '30' }, { ttl_s: 1.5 }, []]) {
    const reply = await call(started.server, '/api/bots/self/heartbeat', { body, from: SELF.address });
    t.is(reply.status, 400, JSON.stringify(body));
  }
});
