import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import type { BotStats } from '../../src/runtime/driver.js';
import { StatsSamples } from '../../src/stats/stats-samples.js';

/** Running bots whose readings say how many times each was read; `failing` ones throw. */
function fakeDriver(running: string[], failing = new Set<string>()) {
  const reads = new Map<string, number>();
  let inFlight = 0;
  let mostAtOnce = 0;
  return {
    running,
    reads,
    get mostAtOnce() {
      return mostAtOnce;
    },
    runningBots: () => [...running],
    async stats(botId: string): Promise<BotStats> {
      inFlight += 1;
      mostAtOnce = Math.max(mostAtOnce, inFlight);
      await new Promise((resolve) => setTimeout(resolve, 1));
      inFlight -= 1;
      if (failing.has(botId)) throw new Error('not running any more');
      const n = (reads.get(botId) ?? 0) + 1;
      reads.set(botId, n);
      return { cpuPercent: n, memoryBytes: n * 1024, memoryPercent: 0, memoryLimitBytes: 0, startedAt: new Date(0) };
    },
  };
}

test('every running bot is read each round; samples come oldest first, only those of the last 15 minutes', async (t) => {
  let now = 1_000_000;
  const driver = fakeDriver(['bot_1_1_a', 'bot_1_1_b']);
  const samples = new StatsSamples(driver, { intervalMs: 15_000, keepMs: 15 * 60_000, now: () => now });
  for (let round = 0; round < 100; round += 1) {
    now += 15_000;
    await samples.sample();
  }
  const kept = samples.samples('bot_1_1_a');
  // 15 minutes at one sample each 15 s: the last 60 rounds are within the span.
  t.is(kept.length, 60);
  t.deepEqual(
    kept.map((sample) => sample.cpuPercent),
    Array.from({ length: 60 }, (_, i) => 41 + i),
  );
  t.true(kept.every((sample, i) => i === 0 || sample.at > kept[i - 1]!.at));
  t.is(kept.at(-1)!.memoryBytes, 100 * 1024);
  t.deepEqual(samples.samples('bot_1_1_unknown'), []);
  t.is(samples.bots, 2);
  t.is(samples.bytes, 2 * 61 * 20);
});

test('a bot that stopped keeps its samples until they are older than the span, then is forgotten', async (t) => {
  let now = 0;
  const driver = fakeDriver(['bot_1_1_a', 'bot_1_1_b']);
  const samples = new StatsSamples(driver, { intervalMs: 1_000, keepMs: 10_000, now: () => now });
  await samples.sample();
  driver.running.splice(driver.running.indexOf('bot_1_1_b'), 1);
  now += 5_000;
  await samples.sample();
  t.is(samples.samples('bot_1_1_b').length, 1);
  now += 6_000;
  await samples.sample();
  t.deepEqual(samples.samples('bot_1_1_b'), []);
  t.is(samples.bots, 1, 'the stopped bot still holds its ring');
});

test('bounded: reads at once at most the concurrency, bots at most maxBots; a failed read is skipped, not kept', async (t) => {
  const bots = Array.from({ length: 200 }, (_, i) => `bot_1_${i}_x`);
  const driver = fakeDriver(bots, new Set(['bot_1_7_x']));
  const samples = new StatsSamples(driver, { concurrency: 8, maxBots: 150 });
  await samples.sample();
  t.is(driver.mostAtOnce, 8);
  t.is(samples.bots, 150);
  t.deepEqual(samples.samples('bot_1_7_x'), []);
});

test('a round asked for while one is under way is that round: each bot is read once', async (t) => {
  const driver = fakeDriver(['bot_1_1_a']);
  const samples = new StatsSamples(driver);
  await Promise.all([samples.sample(), samples.sample(), samples.sample()]);
  t.is(driver.reads.get('bot_1_1_a'), 1);
});

test("a round asks the runtime for every bot at once where it can, and reads no bot on its own then; a failed ask leaves each bot's read to ask on its own", async (t) => {
  const calls: string[] = [];
  const reading = fakeDriver(['bot_1_1_a', 'bot_1_1_b']);
  const driver = {
    ...reading,
    runningBots: reading.runningBots,
    stats: async (botId: string) => {
      calls.push(`stats ${botId}`);
      return reading.stats(botId);
    },
    statsRound: async () => {
      calls.push('round');
      if (calls.filter((call) => call === 'round').length === 2) throw new Error('metrics.k8s.io did not answer');
      // The bot the runtime has no stats for (a pod not measured yet) gets no sample.
      return new Map([['bot_1_1_a', await reading.stats('bot_1_1_a')]]);
    },
  };
  const samples = new StatsSamples(driver, { intervalMs: 15_000, keepMs: 15 * 60_000 });
  await samples.sample();
  t.deepEqual([samples.samples('bot_1_1_a').length, samples.samples('bot_1_1_b').length], [1, 0]);
  await samples.sample();
  t.deepEqual(calls, ['round', 'round', 'stats bot_1_1_a', 'stats bot_1_1_b']);
  t.deepEqual([samples.samples('bot_1_1_a').length, samples.samples('bot_1_1_b').length], [2, 1]);
});

// Kept across restarts in AGENT_DATA_DIR (docs/api.md §12): an agent started again draws the same charts.
test('samples written at close are read back by the next life, network counters included; those aged out are not', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'samples-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'stats-samples');
  let now = 10_000_000;
  const driver = fakeDriver(['bot_1_1_a', 'bot_1_1_b']);
  const withNetwork = { ...driver, stats: async (botId: string) => ({ ...(await driver.stats(botId)), ...(botId === 'bot_1_1_a' ? { io: { networkRxBytes: now, networkTxBytes: 7, blockReadBytes: 0, blockWriteBytes: 0 } } : {}) }) };
  const first = new StatsSamples(withNetwork, { file, now: () => now });
  for (let round = 0; round < 70; round += 1) {
    now += 15_000;
    await first.sample();
  }
  await first.close();
  const before = { a: first.samples('bot_1_1_a'), b: first.samples('bot_1_1_b') };
  t.is(before.a.length, 60);
  t.like(before.a.at(-1), { networkRxBytes: now, networkTxBytes: 7 });
  t.like(before.b.at(-1), { networkRxBytes: null, networkTxBytes: null });

  // Started again a minute later, off the runtime for now: the same samples, without a read.
  now += 60_000;
  const next = new StatsSamples(fakeDriver([]), { file, now: () => now });
  next.start();
  t.teardown(() => next.close());
  t.deepEqual(next.samples('bot_1_1_a'), before.a.slice(4));
  t.deepEqual(next.samples('bot_1_1_b'), before.b.slice(4));
  t.is(next.bots, 2);

  // Started again past the span: none.
  now += 15 * 60_000;
  const late = new StatsSamples(fakeDriver([]), { file, now: () => now });
  late.start();
  t.teardown(() => late.close());
  t.is(late.bots, 0);
});

test('a samples file cut at any byte (never so when it is renamed in whole) or a half-written next one is read as none, and the agent goes on', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'samples-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'stats-samples');
  let now = 10_000_000;
  const kept = new StatsSamples(fakeDriver(['bot_1_1_a', 'bot_1_1_b']), { file, now: () => now });
  await kept.sample();
  now += 15_000;
  await kept.sample();
  await kept.close();
  const whole = await readFile(file);
  const reports: string[] = [];
  for (let length = 0; length < whole.length; length += 1) {
    await writeFile(file, whole.subarray(0, length));
    const again = new StatsSamples(fakeDriver([]), { file, now: () => now }, (what) => reports.push(what));
    again.start();
    await again.close();
    t.is(again.bots, 0, `cut at ${length} of ${whole.length}`);
  }
  t.is(reports.length, whole.length);
  // A SIGKILL while writing leaves the next file half-written beside the whole one: the whole one is read, the next replaced.
  await writeFile(file, whole);
  await writeFile(`${file}.next`, whole.subarray(0, 9));
  const after = new StatsSamples(fakeDriver(['bot_1_1_a']), { file, now: () => now });
  after.start();
  t.is(after.samples('bot_1_1_a').length, 2);
  now += 15_000;
  await after.sample();
  await after.close();
  const reread = new StatsSamples(fakeDriver([]), { file, now: () => now });
  reread.start();
  await reread.close();
  t.is(reread.samples('bot_1_1_a').length, 3);
});
