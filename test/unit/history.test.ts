import test from 'ava';
import { signalOf } from '../../src/history/bot-history.js';
import { CRASH_WINDOW_MS, isCrashLooping, RECOVER_AFTER_MS, recoversAt } from '../../src/history/crash-loop.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { EXIT_LOG_BYTES, HistoryStore } from '../../src/history/history-store.js';
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

test('the store keeps the last 50 records of a bot, whatever their age, and one record per run; older ones of the last hour still count as crashes', (t) => {
  const store = new HistoryStore(':memory:');
  const old = Date.now() - 2 * 3_600_000;
  const record = (atMs: number) => ({ at: new Date(atMs).toISOString(), exit_code: 1, signal: null, oom_killed: false, requested: false, started_at: null, logs: 'x\n' });
  for (let i = 0; i < 60; i += 1) store.addExit('bot_1_1_a', record(old + i), `run-${i}`);
  t.false(store.addExit('bot_1_1_a', record(old + 59), 'run-59'), 'a run seen twice is kept once');
  t.is(store.exits('bot_1_1_a', 100).length, 50);
  t.is(store.exits('bot_1_1_a', 1)[0]!.at, new Date(old + 59).toISOString(), 'newest first');
  for (let i = 0; i < 60; i += 1) store.addExit('bot_1_1_b', record(Date.now() - 60 + i), `recent-${i}`);
  t.is(store.exits('bot_1_1_b', 100).length, 50, 'records younger than an hour are not kept past 50');
  t.true(store.exits('bot_1_1_b', 50).every((exit) => exit.logs === 'x\n'));
  t.is(store.crashesSince('bot_1_1_b', Date.now() - 3_600_000).length, 60, 'the last hour is counted whole');
  store.close();
});

test('a record keeps at most 64 KiB of logs as answered in JSON, the newest lines, whatever bytes the bot wrote', (t) => {
  const store = new HistoryStore(':memory:');
  const control = `${'\x01'.repeat(42_000)}\n`.repeat(100);
  store.addExit('bot_1_1_a', { at: new Date().toISOString(), exit_code: 1, signal: null, oom_killed: false, requested: false, started_at: null, logs: control + 'last words\n' }, 'run');
  const [kept] = store.exits('bot_1_1_a', 1);
  t.true(Buffer.byteLength(JSON.stringify(kept!.logs)) - 2 <= EXIT_LOG_BYTES);
  t.true(kept!.logs.endsWith('last words\n'));
  t.true(Buffer.byteLength(JSON.stringify(store.exits('bot_1_1_a', 50))) < EXIT_LOG_BYTES + 1024);
  store.close();
});

test('a store of an earlier version, with logs inside each record, is moved and bounded when opened', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'history-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const db = new DatabaseSync(join(dir, 'history.sqlite'));
  db.exec('CREATE TABLE exits (seq INTEGER PRIMARY KEY AUTOINCREMENT, bot_id TEXT NOT NULL, at_ms INTEGER NOT NULL, requested INTEGER NOT NULL, record TEXT NOT NULL, run_key TEXT UNIQUE)');
  const insert = db.prepare('INSERT INTO exits (bot_id, at_ms, requested, record, run_key) VALUES (?, ?, 0, ?, ?)');
  const huge = `${'\x01'.repeat(100_000)}\nthe end\n`;
  for (let i = 0; i < 55; i += 1) {
    insert.run('bot_1_1_a', Date.now() - 1000 + i, JSON.stringify({ at: new Date(Date.now() - 1000 + i).toISOString(), exit_code: i, signal: null, oom_killed: false, requested: false, started_at: null, logs: huge }), `run-${i}`);
  }
  db.close();
  const store = new HistoryStore(dir);
  const exits = store.exits('bot_1_1_a', 50);
  t.is(exits.length, 50);
  t.is(exits[0]!.exit_code, 54);
  t.true(exits.every((exit) => exit.logs.endsWith('the end\n') && Buffer.byteLength(JSON.stringify(exit.logs)) - 2 <= EXIT_LOG_BYTES));
  store.close();
});

test('forgetting a bot drops its records, events and crash loop, and says since when', (t) => {
  const store = new HistoryStore(':memory:');
  store.addExit('bot_1_1_a', { at: new Date().toISOString(), exit_code: 1, signal: null, oom_killed: false, requested: false, started_at: null, logs: '' }, 'run');
  store.appendEvent('bot_1_1_a', 'started', Date.now(), () => '{}');
  store.appendEvent('bot_1_1_b', 'started', Date.now(), () => '{}');
  store.setCrashLoop('bot_1_1_a', Date.now());
  store.forget('bot_1_1_a', 1234);
  t.deepEqual(store.exits('bot_1_1_a', 50), []);
  t.deepEqual(store.eventsAfter(0, 'bot_1_1_a', 10), []);
  t.is(store.eventsAfter(0, undefined, 10).length, 1, "another bot's events stay");
  t.false(store.isCrashLooping('bot_1_1_a'));
  t.is(store.forgottenAt('bot_1_1_a'), 1234);
  t.is(store.forgottenAt('bot_1_1_b'), undefined);
  store.close();
});
