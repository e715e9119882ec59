import test from 'ava';
import { LogCollector } from '../../src/log-history/log-collector.js';
import { LogStore } from '../../src/log-history/log-store.js';
import type { LogsFrom, RuntimeDriver } from '../../src/runtime/driver.js';

// The collector's bounds (docs/api.md §21), with a stand-in runtime of many running bots whose streams stay open:
// follows begin a hundred a sweep, and a bot never followed before is read from at most 10 minutes back.
function standIn(count: number, startedAt: Date) {
  const follows: Array<{ botId: string; from: LogsFrom }> = [];
  const driver = {
    runningBots: () => Array.from({ length: count }, (_, i) => `bot_${i}_1_x`),
    findBot: async (botId: string) => ({ id: botId, ownerId: 'user_1', running: true, startedAt }),
    botSecrets: async () => [],
    followLogs: (botId: string, from: LogsFrom, _onLine: unknown, signal: AbortSignal) => {
      follows.push({ botId, from });
      return new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
    },
  } as unknown as RuntimeDriver;
  return { driver, follows };
}

const options = { ratePerSecond: 100, retention: { days: 7, botBytes: 1e9, totalBytes: 1e9 } };

test('an agent beside 250 running bots begins following 100 a sweep, then the next 100', async (t) => {
  const { driver, follows } = standIn(250, new Date());
  const collector = new LogCollector(driver, new LogStore(':memory:', () => undefined), options, () => undefined);
  t.teardown(() => collector.close());
  collector.sweep();
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.is(follows.length, 100);
  collector.sweep();
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.is(follows.length, 200);
  t.is(new Set(follows.map((follow) => follow.botId)).size, 200, 'no bot followed twice');
});

test('a bot that ran for days before its first follow is read from 10 minutes back, not from its start', async (t) => {
  const { driver, follows } = standIn(1, new Date(Date.now() - 3 * 86_400_000));
  const collector = new LogCollector(driver, new LogStore(':memory:', () => undefined), options, () => undefined);
  t.teardown(() => collector.close());
  collector.sweep();
  await new Promise((resolve) => setTimeout(resolve, 200));
  const since = (follows[0]?.from as { since: Date }).since.getTime();
  t.true(Math.abs(since - (Date.now() - 10 * 60_000)) < 5_000, new Date(since).toISOString());
});
