import test from 'ava';
import { signalOf } from '../../src/history/bot-history.js';
import { CRASH_WINDOW_MS, isCrashLooping, RECOVER_AFTER_MS, recoversAt } from '../../src/history/crash-loop.js';
import { SqliteHistoryStore } from '../../src/history/sqlite-store.js';
import { historyBatchSuite } from '../helpers/history-batch-suite.js';
import { storeSuite } from '../helpers/store-suite.js';
import { GIVE_UP_MS, retryDelayMs, signatureOf } from '../../src/history/webhook.js';

const MIN = 60_000;

test('crash-looping: 3 unrequested ends within 10 minutes, counted at the time asked', (t) => {
  t.is(CRASH_WINDOW_MS, 10 * MIN);
  t.is(RECOVER_AFTER_MS, 10 * MIN);
  const now = 100 * MIN;
  t.true(isCrashLooping([now - 9 * MIN, now - 5 * MIN, now], now));
  t.false(isCrashLooping([now - 11 * MIN, now - 5 * MIN, now], now), 'one fell out of the window');
  t.false(isCrashLooping([now - 1, now], now), 'two are not a loop');
  t.false(isCrashLooping([now - 2, now - 1, now + 1], now), 'the future does not count');
});

test('recovery: 10 minutes of running after both the last crash and the start of the run; none while not running', (t) => {
  t.is(recoversAt(50 * MIN, 51 * MIN), 61 * MIN);
  t.is(recoversAt(52 * MIN, 51 * MIN), 62 * MIN, 'a crash after the start still counts from the crash');
  t.is(recoversAt(50 * MIN, undefined), undefined);
});

test('a signal is named from an exit code of 128 + its number', (t) => {
  t.is(signalOf(137), 'SIGKILL');
  t.is(signalOf(143), 'SIGTERM');
  t.is(signalOf(139), 'SIGSEGV');
  t.is(signalOf(3), null);
  t.is(signalOf(null), null);
  t.is(signalOf(255), null);
});

test('webhook: deliveries are signed HMAC-SHA256 of the raw body; retries wait longer each time, up to 5 minutes', (t) => {
  t.regex(signatureOf('{"a":1}', 'key'), /^sha256=[0-9a-f]{64}$/);
  t.not(signatureOf('{"a":1}', 'key'), signatureOf('{"a":2}', 'key'));
  t.deepEqual([1, 2, 3, 4].map(retryDelayMs), [1_000, 2_000, 4_000, 8_000]);
  t.is(retryDelayMs(30), 5 * MIN);
  t.true(GIVE_UP_MS >= 3_600_000, 'retried for at least an hour');
});

storeSuite('SQLite', async () => new SqliteHistoryStore(':memory:'));

historyBatchSuite('SQLite', async () => new SqliteHistoryStore(':memory:'), async () => {
  // A constraint the file refuses (SQLITE_CONSTRAINT): for good, not an outage.
  throw Object.assign(new Error('constraint failed'), { errcode: 19 });
});
