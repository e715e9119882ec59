import test from 'ava';
import { pino } from 'pino';
import { assembleAgent } from '../../src/agent.js';
import type { Agent } from '../../src/agent.js';
import type { StoredEvent } from '../../src/history/history-store.js';
import { TEST_APP_CONFIG } from '../helpers/agent.js';
import { eventually } from '../helpers/eventually.js';
import { BEATS_SHARED_EVERY_MS, Heartbeats } from '../../src/health/heartbeats.js';
import { MemoryDriver } from '../helpers/memory-driver.js';
import type { MemoryBot } from '../helpers/memory-driver.js';

// The watchdog's judgement (docs/api.md §13), its clock in the test's hand: when a bot is unhealthy, when it
// is restarted, and when it is left be. The real engine's tests (test/docker/health.test.ts) do it for real.

const GRACE_MS = 10_000;

function agentOver(driver: MemoryDriver, t: { teardown(fn: () => Promise<void>): void }, restartsUnhealthy = false, acts = true): { agent: Agent; events: StoredEvent[] } {
  Object.defineProperty(driver, 'restartsUnhealthy', { value: restartsUnhealthy });
  // Its clock in the test's hand: it looks only when the test calls tick().
  const agent = assembleAgent({ driver, config: TEST_APP_CONFIG, logger: pino({ level: 'silent' }), statsSamples: 'off', watchdog: { acts, tickMs: 3_600_000 } });
  const events: StoredEvent[] = [];
  agent.history.follow((event) => events.push(event));
  t.teardown(() => agent.close());
  return { agent, events };
}

function bot(driver: MemoryDriver, fields: Partial<MemoryBot> = {}): MemoryBot {
  return driver.add({
    id: `bot_1_${driver.bots.size}_wd`,
    startedAt: new Date(Date.now() - 60_000),
    healthPolicy: { graceMs: GRACE_MS, heartbeatTtlMs: undefined },
    ...fields,
  });
}

const named = (events: StoredEvent[], type: string, botId: string) => events.filter((event) => event.type === type && event.botId === botId);

test('a bot whose beats stop: unhealthy once its ttl has passed (one event however often it is looked at), restarted once its grace has too, once per run', async (t) => {
  const driver = new MemoryDriver();
  const { agent, events } = agentOver(driver, t);
  const quiet = bot(driver);
  const now = Date.now();
  agent.heartbeats.beat(quiet.id, 5_000, now);
  agent.watchdog.tick(now + 4_000);
  t.like(agent.watchdog.lastJudged(quiet.id), { status: 'healthy', check: 'heartbeat' });
  for (const at of [now + 5_000, now + 6_000, now + 7_000]) agent.watchdog.tick(at);
  t.true(await eventually(() => named(events, 'unhealthy', quiet.id).length === 1, 2_000));
  t.like(JSON.parse(named(events, 'unhealthy', quiet.id)[0]!.data), { check: 'heartbeat', output: `no heartbeat for 5 s (since ${new Date(now).toISOString()})` });
  t.is(driver.lifecycleCalls.length, 0, 'within its grace');
  agent.watchdog.tick(now + 5_000 + GRACE_MS);
  agent.watchdog.tick(now + 6_000 + GRACE_MS);
  t.true(await eventually(() => driver.lifecycleCalls.length === 1, 2_000));
  t.deepEqual(driver.lifecycleCalls, [`restart:${quiet.id}`]);
  t.like(JSON.parse(named(events, 'restarted', quiet.id)[0]!.data), { reason: 'unhealthy', check: 'heartbeat', unhealthy_since: new Date(now + 5_000).toISOString() });
  // Its new run has its ttl from its start to beat: until then it is starting, and not touched.
  agent.watchdog.tick(Date.now() + 1_000);
  t.like(agent.watchdog.lastJudged(quiet.id), { status: 'starting', check: 'heartbeat' });
  await agent.lifecycle.drain();
  t.is(driver.lifecycleCalls.length, 1);
});

test('a failing check past its grace is restarted; a healthy, a starting and a checkless bot never are, whatever the time', async (t) => {
  const driver = new MemoryDriver();
  const { agent, events } = agentOver(driver, t);
  const now = Date.now();
  const failing = bot(driver, { health: { status: 'unhealthy', output: 'gateway lost' }, healthSinceMs: now });
  const others = [
    bot(driver, { health: { status: 'healthy', output: null } }),
    bot(driver, { health: { status: 'starting', output: null } }),
    bot(driver),
  ];
  for (let at = now; at <= now + 3 * GRACE_MS; at += 1_000) agent.watchdog.tick(at);
  t.true(await eventually(() => named(events, 'restarted', failing.id).length === 1, 2_000));
  await agent.lifecycle.drain();
  t.deepEqual(driver.lifecycleCalls, [`restart:${failing.id}`]);
  t.like(JSON.parse(named(events, 'unhealthy', failing.id)[0]!.data), { check: 'exec', output: 'gateway lost' });
  for (const other of others) t.is(named(events, 'unhealthy', other.id).length + named(events, 'restarted', other.id).length, 0);
  t.deepEqual(agent.watchdog.counts(), { healthy: 1, unhealthy: 1, starting: 1, none: 1 });
});

for (const [why, restartsUnhealthy, acts] of [
  ['where the runtime restarts for a failing check itself (the kubelet)', true, true],
  ['with AGENT_WATCHDOG=off', false, false],
] as const) {
  test(`${why}, the watchdog reports an unhealthy bot and restarts it never`, async (t) => {
    const driver = new MemoryDriver();
    const { agent, events } = agentOver(driver, t, restartsUnhealthy, acts);
    const now = Date.now();
    const failing = bot(driver, { health: { status: 'unhealthy', output: 'probe failed' }, healthSinceMs: now });
    for (let at = now; at <= now + 3 * GRACE_MS; at += 1_000) agent.watchdog.tick(at);
    t.true(await eventually(() => named(events, 'unhealthy', failing.id).length === 1, 2_000));
    await new Promise((resolve) => setTimeout(resolve, 100));
    t.deepEqual(driver.lifecycleCalls, []);
    t.is(named(events, 'restarted', failing.id).length, 0);
  });
}

test("a beat from before the bot was made was an earlier bot's of the same id: the new bot is not expected to beat", (t) => {
  const driver = new MemoryDriver();
  const { agent } = agentOver(driver, t);
  const now = Date.now();
  const remade = bot(driver);
  agent.heartbeats.beat(remade.id, 5_000, now - 120_000);
  const info = { id: remade.id, ownerId: 'user_1', running: true, startedAt: remade.startedAt, health: remade.health, healthPolicy: remade.healthPolicy };
  t.like(agent.watchdog.healthOf({ ...info, createdAt: new Date(now - 90_000) }, now), { status: 'none', check: null, since: null });
  t.like(agent.watchdog.healthOf(info, now), { status: 'unhealthy', check: 'heartbeat' }, 'the same beat, for a bot made before it');
});

test('a heartbeat is one entry in memory per bot, however many come; a removed bot\'s goes within a minute of looks', (t) => {
  const driver = new MemoryDriver();
  const { agent } = agentOver(driver, t);
  const beating = bot(driver);
  const removed = bot(driver);
  for (let i = 0; i < 10_000; i++) agent.heartbeats.beat(beating.id, null, Date.now());
  agent.heartbeats.beat(removed.id, null, Date.now());
  t.is(agent.heartbeats.size, 2);
  driver.bots.delete(removed.id);
  for (let i = 0; i < 60; i++) agent.watchdog.tick();
  t.is(agent.heartbeats.size, 1);
  t.is(agent.heartbeats.latest(removed.id), undefined);
  t.truthy(agent.heartbeats.latest(beating.id), 'a bot that is still there keeps its beat');
});

test('a database that does not answer a round of beats gets no queue of rounds behind it: the next begins once it ends', async (t) => {
  let answer = (): void => undefined;
  let asked = 0;
  const shared = {
    shareBeats: () => new Promise<void>((resolve) => (answer = resolve)),
    beatsAfter: async (round: number) => {
      asked += 1;
      return { beats: [], round };
    },
  };
  const heartbeats = new Heartbeats(shared);
  heartbeats.beat('bot_1_1_silent', null);
  heartbeats.start();
  t.teardown(() => heartbeats.close());
  // Three rounds' time while the first round's write hangs.
  await new Promise((resolve) => setTimeout(resolve, 3.5 * BEATS_SHARED_EVERY_MS));
  answer();
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.is(asked, 1, 'rounds queued behind the silent one ran back to back once it answered');
});

/** When (ms after `now`) the watchdog restarted `failing`, looking every second for `forMs`. */
async function restartTimes(agent: Agent, failing: MemoryBot, now: number, forMs: number): Promise<number[]> {
  const restartsAt: number[] = [];
  for (let at = now; at <= now + forMs; at += 1_000) {
    agent.watchdog.tick(at);
    await new Promise((resolve) => setTimeout(resolve, 2));
    await agent.lifecycle.drain();
    if (failing.restarts > restartsAt.length) restartsAt.push(at - now);
  }
  return restartsAt;
}

test("the watchdog's restarts of one bot back off as the kubelet's do: 10 s, doubling, however short the grace; another bot is not held back", async (t) => {
  const driver = new MemoryDriver();
  const { agent } = agentOver(driver, t);
  const now = Date.now();
  const grace = { graceMs: 5_000, heartbeatTtlMs: undefined };
  // Its check fails in every run: each new run is unhealthy at once, past its grace.
  const failing = bot(driver, { health: { status: 'unhealthy', output: 'down' }, healthSinceMs: now - 60_000, healthPolicy: grace });
  const restartsAt = await restartTimes(agent, failing, now, 120_000);
  // Before, it was restarted at every look once its grace had passed: 121 times here.
  t.deepEqual(restartsAt, [0, 10_000, 30_000, 70_000], `restarted at ${restartsAt.join(', ')} ms`);
  const other = bot(driver, { health: { status: 'unhealthy', output: 'down' }, healthSinceMs: now - 60_000, healthPolicy: grace });
  agent.watchdog.tick(now + 121_000);
  t.true(await eventually(() => other.restarts === 1, 2_000), 'another bot waited for the first one\'s back-off');
});

test("a bot's restart policy sets the watchdog's back-off: its own first wait, doubling up to its own most", async (t) => {
  const driver = new MemoryDriver();
  const { agent } = agentOver(driver, t);
  const now = Date.now();
  const policy = { graceMs: 5_000, heartbeatTtlMs: undefined, restart: { maxCrashes: undefined, windowMs: 600_000, backoffFirstMs: 2_000, backoffMaxMs: 8_000 } };
  const failing = bot(driver, { health: { status: 'unhealthy', output: 'down' }, healthSinceMs: now - 60_000, healthPolicy: policy });
  const restartsAt = await restartTimes(agent, failing, now, 40_000);
  // The default would be 0, 10 s, 30 s.
  t.deepEqual(restartsAt, [0, 2_000, 6_000, 14_000, 22_000, 30_000, 38_000], `restarted at ${restartsAt.join(', ')} ms`);
});
