import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { HistorySpool } from '../../src/history/history-spool.js';

const folder = () => mkdtempSync(join(tmpdir(), 'bot-agent-spool-'));

test('what waits outlives the agent: a spool opened again holds the writes not yet written, in order, none twice', (t) => {
  const dir = folder();
  const spool = new HistorySpool<{ n: number }>(dir, 1_000_000);
  for (let n = 1; n <= 5; n += 1) spool.add({ n });
  spool.shift();
  spool.shift();
  const reopened = new HistorySpool<{ n: number }>(dir, 1_000_000);
  t.deepEqual([...reopened.waiting()], [{ n: 3 }, { n: 4 }, { n: 5 }]);
  t.deepEqual(reopened.first(), { n: 3 });
  reopened.add({ n: 6 });
  reopened.shift();
  t.deepEqual([...new HistorySpool<{ n: number }>(dir, 1_000_000).waiting()], [{ n: 4 }, { n: 5 }, { n: 6 }]);
});

test('once all is written the files go', (t) => {
  const dir = folder();
  const spool = new HistorySpool<{ n: number }>(dir, 1_000_000);
  spool.add({ n: 1 });
  t.true(existsSync(join(dir, 'history-spool.jsonl')));
  spool.shift();
  t.deepEqual(readdirSync(dir), []);
  t.is(new HistorySpool(dir, 1_000_000).size, 0);
});

test('bounded: past its bytes a write is refused and counted as dropped; what waits is kept', (t) => {
  const spool = new HistorySpool<{ text: string }>(undefined, 100);
  t.true(spool.add({ text: 'a'.repeat(40) }));
  t.false(spool.add({ text: 'b'.repeat(60) }));
  t.is(spool.dropped, 1);
  t.is(spool.size, 1);
  t.true(spool.waitingBytes <= 100);
});

test('a spool that keeps receiving while it is written is rewritten with only what waits, and still reopens right', (t) => {
  const dir = folder();
  const spool = new HistorySpool<{ n: number }>(dir, 10_000_000);
  for (let n = 0; n < 3_000; n += 1) {
    spool.add({ n });
    if (n % 3 !== 0) spool.shift();
  }
  const waiting = [...spool.waiting()].map((item) => item.n);
  t.is(waiting.length, 1_000);
  const lines = readFileSync(join(dir, 'history-spool.jsonl'), 'utf8').split('\n').length - 1;
  t.true(lines <= waiting.length + 1_000, `the file holds ${lines} lines, not all 3,000 ever added`);
  t.deepEqual([...new HistorySpool<{ n: number }>(dir, 10_000_000).waiting()].map((item) => item.n), waiting);
});
