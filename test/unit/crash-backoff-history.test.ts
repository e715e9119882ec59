import test from 'ava';
import { BotHistory } from '../../src/history/bot-history.js';
import type { BackOff } from '../../src/history/bot-history.js';
import { SqliteHistoryStore } from '../../src/history/sqlite-store.js';
import type { BotInfo, RunEnd } from '../../src/runtime/driver.js';
import { SharedState } from '../../src/shared/shared-state.js';

// Which crashes start a back-off under a bot's restart policy (docs/api.md §13): from the second in the window, each
// doubling the wait up to its most; a restart for the bot's health counts among the crashes but starts none (it
// waited out the watchdog's own back-off, or the kubelet's).
test('a back-off from the second crash, doubling to its most; a restart for health counts, but starts none', async (t) => {
  const store = new SqliteHistoryStore(':memory:');
  const policy = { maxCrashes: undefined, windowMs: 600_000, backoffFirstMs: 2_000, backoffMaxMs: 8_000 };
  const info = { id: 'bot_1_1_a', ownerId: 'user_1', running: false, startedAt: undefined, health: 'none', healthPolicy: { graceMs: undefined, heartbeatTtlMs: undefined, restart: policy } } as unknown as BotInfo;
  const backOffs: BackOff[] = [];
  const history = new BotHistory(store, new SharedState(store), async () => info, { onBackingOff: (backOff) => backOffs.push(backOff) });
  t.teardown(async () => {
    await history.close();
    await store.close();
  });
  const now = Date.now();
  const crash = (n: number, unhealthy?: RunEnd['unhealthy']): RunEnd => ({
    botId: 'bot_1_1_a',
    at: new Date(now + n * 1_000),
    exitCode: 3,
    oomKilled: false,
    requested: false,
    startedAt: new Date(now + n * 1_000 - 500),
    logs: '',
    unhealthy,
    key: `run-${n}`,
  });
  await history.ended(crash(1));
  t.is(backOffs.length, 0, 'the first crash is the runtime\'s to restart at once');
  await history.ended(crash(2));
  t.like(backOffs[0], { botId: 'bot_1_1_a', untilMs: now + 2_000 + 2_000 });
  await history.ended(crash(3, { check: 'exec', output: 'down' }));
  t.is(backOffs.length, 1, 'a restart for its health starts no back-off');
  await history.ended(crash(4));
  t.like(backOffs[1], { untilMs: now + 4_000 + 8_000 }, 'the fourth crash: 2 s doubled twice');
  await history.ended(crash(4));
  t.is(backOffs.length, 2, 'a run seen twice backs off once');
  const pending = await history.pendingBackOffs(Date.now());
  t.deepEqual(pending.map((backOff) => backOff.seq), [backOffs[1]!.seq], 'only the newest is pending');
});

test('no back-off for a bot given up on, nor for a crash kept after its wait was over (a spool replayed late)', async (t) => {
  const store = new SqliteHistoryStore(':memory:');
  const policy = { maxCrashes: 3, windowMs: 600_000, backoffFirstMs: 2_000, backoffMaxMs: 8_000 };
  const info = { id: 'bot_1_1_a', ownerId: 'user_1', running: false, startedAt: undefined, health: 'none', healthPolicy: { graceMs: undefined, heartbeatTtlMs: undefined, restart: policy } } as unknown as BotInfo;
  const backOffs: BackOff[] = [];
  const givenUp: string[] = [];
  const history = new BotHistory(store, new SharedState(store), async () => info, { onBackingOff: (backOff) => backOffs.push(backOff), onGivenUp: (botId) => givenUp.push(botId) });
  t.teardown(async () => {
    await history.close();
    await store.close();
  });
  const crash = (atMs: number, key: string): RunEnd => ({ botId: 'bot_1_1_a', at: new Date(atMs), exitCode: 3, oomKilled: false, requested: false, startedAt: new Date(atMs - 500), logs: '', key });
  const now = Date.now();
  await history.ended(crash(now - 60_000, 'old-1'));
  await history.ended(crash(now - 50_000, 'old-2'));
  t.is(backOffs.length, 0, 'its wait was over when it was kept');
  await history.ended(crash(now, 'third'));
  t.deepEqual(givenUp, ['bot_1_1_a']);
  await history.ended(crash(now + 1_000, 'after-the-give-up'));
  t.is(backOffs.length, 0, 'a run that ended after the give-up starts no back-off, which would start the bot');
});
