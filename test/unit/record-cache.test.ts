import test from 'ava';
import { BotHistory } from '../../src/history/bot-history.js';
import type { KeptRecord } from '../../src/history/history-store.js';
import { RecordCache } from '../../src/history/record-cache.js';
import { SqliteHistoryStore } from '../../src/history/sqlite-store.js';
import type { BotInfo } from '../../src/runtime/driver.js';
import { SharedState } from '../../src/shared/shared-state.js';

// A status read's record from memory (docs/performance.md), until the bot's next event or write says it changed.
const info = (id: string) => ({ id, ownerId: 'user_1', running: true, startedAt: undefined, health: 'none', healthPolicy: { graceMs: undefined, heartbeatTtlMs: undefined } }) as unknown as BotInfo;

test("a bot's record is read from the store once, and again after each of its runs ends; another bot's end changes nothing of it", async (t) => {
  const store = new SqliteHistoryStore(':memory:');
  let reads = 0;
  const botRecord = store.botRecord.bind(store);
  store.botRecord = async (botId, sinceMs) => {
    reads += 1;
    return botRecord(botId, sinceMs);
  };
  const history = new BotHistory(store, new SharedState(store), async (id) => info(id));
  t.teardown(async () => {
    await history.close();
    await store.close();
  });
  const crash = (botId: string, n: number) =>
    history.ended({ botId, key: `${botId}:${n}`, at: new Date(Date.now() - 1_000 + n), exitCode: 1, oomKilled: false, requested: false, startedAt: new Date(Date.now() - 2_000), logs: `crash ${n}\n` });
  t.is((await history.record('bot_1_1_a', new Date())).lastExit, null);
  await history.record('bot_1_1_a', new Date());
  t.is(reads, 1, 'the second read came from memory');
  await crash('bot_1_1_a', 1);
  const after = await history.record('bot_1_1_a', new Date());
  t.is(after.lastExit?.logs, 'crash 1\n');
  t.is(after.crashesLastHour, 1);
  t.is(reads, 2);
  await crash('bot_1_1_b', 1);
  await history.record('bot_1_1_a', new Date());
  t.is(reads, 2, "another bot's end leaves this one's record held");
  t.is((await history.record('bot_1_1_a', new Date(Date.now() + 3_600_000))).crashesLastHour, 0, 'a crash an hour old counts no more, held or not');
});

test('a read of the store begun before a change is not kept', (t) => {
  const cache = new RecordCache();
  const record: KeptRecord = { lastExit: null, crashLooping: false, crashes: [], givenUp: undefined };
  const mark = cache.mark('bot_1_1_a');
  cache.changed('bot_1_1_a');
  cache.put('bot_1_1_a', mark, record);
  t.is(cache.get('bot_1_1_a'), undefined);
  cache.put('bot_1_1_a', cache.mark('bot_1_1_a'), record);
  t.is(cache.get('bot_1_1_a'), record);
});
