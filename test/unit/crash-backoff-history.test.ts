import test from 'ava';
import type { ExecutionContext } from 'ava';
import { BotHistory } from '../../src/history/bot-history.js';
import type { BackOff } from '../../src/history/bot-history.js';
import { SqliteHistoryStore } from '../../src/history/sqlite-store.js';
import type { BotInfo, RestartPolicy, RunEnd } from '../../src/runtime/driver.js';
import { SharedState } from '../../src/shared/shared-state.js';

/** A history over SQLite in memory whose bot has `policy`, with the back-offs and give-ups it hands on. */
function historyWith(t: ExecutionContext, policy: RestartPolicy) {
  const store = new SqliteHistoryStore(':memory:');
  const info = { id: 'bot_1_1_a', ownerId: 'user_1', running: false, startedAt: undefined, health: 'none', healthPolicy: { graceMs: undefined, heartbeatTtlMs: undefined, restart: policy } } as unknown as BotInfo;
  const backOffs: BackOff[] = [];
  const givenUp: string[] = [];
  const history = new BotHistory(store, new SharedState(store), async () => info, { onBackingOff: (backOff) => backOffs.push(backOff), onGivenUp: (botId) => givenUp.push(botId) });
  t.teardown(async () => {
    await history.close();
    await store.close();
  });
  return { history, backOffs, givenUp };
}

/** A crash of the bot at `atMs`, its run half a second long. */
const crashAt = (atMs: number, key: string, unhealthy?: RunEnd['unhealthy']): RunEnd => ({
  botId: 'bot_1_1_a',
  at: new Date(atMs),
  exitCode: 3,
  oomKilled: false,
  requested: false,
  startedAt: new Date(atMs - 500),
  logs: '',
  unhealthy,
  key,
});

// Which crashes start a back-off under a bot's restart policy (docs/api.md §13): from the second in the window, each
// doubling the wait up to its most; a restart for the bot's health counts among the crashes but starts none (it
// waited out the watchdog's own back-off, or the kubelet's).
test('a back-off from the second crash, doubling to its most; a restart for health counts, but starts none', async (t) => {
  const { history, backOffs } = historyWith(t, { maxCrashes: undefined, windowMs: 600_000, backoffFirstMs: 2_000, backoffMaxMs: 8_000 });
  const now = Date.now();
  const crash = (n: number, unhealthy?: RunEnd['unhealthy']): RunEnd => crashAt(now + n * 1_000, `run-${n}`, unhealthy);
  const waits = () => backOffs.filter((backOff) => backOff.seq !== undefined);
  await history.ended(crash(1));
  t.deepEqual(backOffs, [{ botId: 'bot_1_1_a', untilMs: now + 1_000, seq: undefined, crashAtMs: now + 1_000 }], 'the first crash waits nothing: restarted at once');
  await history.ended(crash(2));
  t.like(waits()[0], { botId: 'bot_1_1_a', untilMs: now + 2_000 + 2_000 });
  await history.ended(crash(3, { check: 'exec', output: 'down' }));
  t.is(backOffs.length, 2, 'a restart for its health starts no back-off, and needs no start');
  await history.ended(crash(4));
  t.like(waits()[1], { untilMs: now + 4_000 + 8_000 }, 'the fourth crash: 2 s doubled twice');
  await history.ended(crash(4));
  t.is(backOffs.length, 3, 'a run seen twice backs off once');
  const pending = await history.pendingBackOffs(Date.now());
  t.deepEqual(pending.map((backOff) => backOff.seq), [waits()[1]!.seq], 'only the newest is pending');
});

test('no back-off for a bot given up on; one for a crash kept after its wait was over (a spool replayed late) is over already', async (t) => {
  const { history, backOffs, givenUp } = historyWith(t, { maxCrashes: 3, windowMs: 600_000, backoffFirstMs: 2_000, backoffMaxMs: 8_000 });
  const crash = crashAt;
  const now = Date.now();
  await history.ended(crash(now - 60_000, 'old-1'));
  await history.ended(crash(now - 50_000, 'old-2'));
  t.is(backOffs[0]?.seq, undefined, 'the first crash waits nothing');
  t.true(backOffs[1]!.untilMs < Date.now(), 'its wait was over when it was kept: a start at most, no stop');
  await history.ended(crash(now, 'third'));
  t.deepEqual(givenUp, ['bot_1_1_a']);
  await history.ended(crash(now + 1_000, 'after-the-give-up'));
  t.is(backOffs.length, 2, 'a run that ended after the give-up starts no back-off, which would start the bot');
});

// Seen in a rehearsal: a stop through the agent ended while the crash it met was still being recorded (its last
// lines are read first); the back-off kept after the stop's event was the bot's latest, and started it again.
test('a crash answered already by an operation kept at or after it backs off not, nor is restarted', async (t) => {
  const { history, backOffs } = historyWith(t, { maxCrashes: undefined, windowMs: 600_000, backoffFirstMs: 2_000, backoffMaxMs: 8_000 });
  const crash = crashAt;
  const now = Date.now();
  await history.ended(crash(now - 2_000, 'first'));
  t.is(backOffs.length, 1);
  await history.operationEnded('bot_1_1_a', 'stop', 'ok', 'platform');
  await history.ended(crash(now - 1_000, 'met-by-the-stop'));
  t.is(backOffs.length, 1, 'the stop answered it');
  await history.ended(crash(Date.now() + 1_000, 'after-the-stop'));
  t.not(backOffs[1]?.seq, undefined, 'a crash after the stop backs off');
});

// What an agent starts, at its start and every 10 s, of the bots whose crashes it restarts (Docker): a crash nothing answered.
test('a crash is unanswered until a start, a back-off or an operation; one kept after the stop that came after it is answered', async (t) => {
  const { history } = historyWith(t, { maxCrashes: undefined, windowMs: 600_000, backoffFirstMs: 60_000, backoffMaxMs: 60_000 });
  const now = Date.now();
  await history.ended(crashAt(now - 5_000, 'first'));
  t.deepEqual(await history.unansweredCrashes(['bot_1_1_a', 'bot_1_1_b'], Date.now()), ['bot_1_1_a']);
  t.deepEqual(await history.unansweredCrashes(['bot_1_1_b'], Date.now()), [], 'only those asked of');
  await history.ended(crashAt(now - 4_000, 'second'));
  t.deepEqual(await history.unansweredCrashes(['bot_1_1_a'], Date.now()), [], 'its back-off answers it');
  await history.operationEnded('bot_1_1_a', 'stop', 'ok', 'platform');
  await history.ended(crashAt(now - 1_000, 'met-by-the-stop'));
  t.deepEqual(await history.unansweredCrashes(['bot_1_1_a'], Date.now()), [], 'the stop after it answers it, though kept before');
});

// Seen in a busy rehearsal: a stop through the agent ended a crash loop while the record of a crash before it was
// still being taken (its last lines read first); kept after, it began the loop again.
test('a crash loop a stop ended is not begun again by the record of a crash before the stop, come late; a crash after it may', async (t) => {
  const { history } = historyWith(t, { maxCrashes: undefined, windowMs: 600_000, backoffFirstMs: 60_000, backoffMaxMs: 60_000 });
  const now = Date.now();
  for (const [n, key] of ['one', 'two', 'three'].entries()) await history.ended(crashAt(now - 5_000 + n * 100, key));
  t.true((await history.record('bot_1_1_a', new Date())).crashLooping);
  await history.operationEnded('bot_1_1_a', 'stop', 'ok', 'platform');
  t.false((await history.record('bot_1_1_a', new Date())).crashLooping, 'the stop ended it');
  await history.ended(crashAt(now - 4_000, 'before-the-stop'));
  t.false((await history.record('bot_1_1_a', new Date())).crashLooping, 'begun again by a crash from before the stop');
  await history.ended(crashAt(Date.now() + 1_000, 'after-the-stop'));
  t.true((await history.record('bot_1_1_a', new Date())).crashLooping);
});
