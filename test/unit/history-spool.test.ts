import { appendFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { DAMAGED_FILE, DONE_FILE, HistorySpool, SPOOL_FILE } from '../../src/history/history-spool.js';

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

test('once all is written the file of writes goes; only the number of the last one written stays', (t) => {
  const dir = folder();
  const spool = new HistorySpool<{ n: number }>(dir, 1_000_000);
  spool.add({ n: 1 });
  t.true(existsSync(join(dir, SPOOL_FILE)));
  spool.shift();
  t.deepEqual(readdirSync(dir), [DONE_FILE]);
  t.is(readFileSync(join(dir, DONE_FILE), 'utf8'), '1');
  const reopened = new HistorySpool<{ n: number }>(dir, 1_000_000);
  t.is(reopened.size, 0);
  reopened.add({ n: 2 });
  t.deepEqual([...new HistorySpool<{ n: number }>(dir, 1_000_000).waiting()], [{ n: 2 }], 'numbers go on after the last one written');
});

test('a line cut off by a kill or a full disk is set aside, counted and reported once; every whole line is still written, and the next write starts a line of its own', (t) => {
  const dir = folder();
  const spool = new HistorySpool<{ n: number }>(dir, 1_000_000);
  for (let n = 1; n <= 3; n += 1) spool.add({ n });
  spool.shift();
  // What SIGKILL, an OOM kill or a full disk leaves: half a line at the end.
  appendFileSync(join(dir, SPOOL_FILE), '{"n":4,"w":{"n":4,"text":"unterminat');
  const reports: string[] = [];
  const reopened = new HistorySpool<{ n: number }>(dir, 1_000_000, (what) => reports.push(what));
  t.deepEqual([...reopened.waiting()], [{ n: 2 }, { n: 3 }]);
  t.is(reopened.damaged, 1);
  t.is(reports.length, 1);
  t.regex(reports[0]!, /1 damaged line/);
  t.is(readFileSync(join(dir, DAMAGED_FILE), 'utf8'), '{"n":4,"w":{"n":4,"text":"unterminat\n');
  reopened.add({ n: 5 });
  const again = new HistorySpool<{ n: number }>(dir, 1_000_000);
  t.deepEqual([...again.waiting()], [{ n: 2 }, { n: 3 }, { n: 5 }]);
  t.is(again.damaged, 0, 'set aside once, not found again');
});

test('a line that is not a write, anywhere in the file, is set aside; the lines around it stay in order', (t) => {
  const dir = folder();
  writeFileSync(join(dir, SPOOL_FILE), '{"n":1,"w":{"a":1}}\nnot json\n{"n":2}\n[1,2]\n{"n":3,"w":{"a":3}}\n');
  const spool = new HistorySpool<{ a: number }>(dir, 1_000_000);
  t.deepEqual([...spool.waiting()], [{ a: 1 }, { a: 3 }]);
  t.is(spool.damaged, 3);
});

test('the number written and the file cannot disagree: a crash after the number, or in the middle of a rewrite, writes nothing twice and skips nothing', (t) => {
  const dir = folder();
  const spool = new HistorySpool<{ n: number }>(dir, 1_000_000);
  for (let n = 1; n <= 4; n += 1) spool.add({ n });
  // The number moved on (a write done), the file not yet rewritten: the line it names is skipped, not written twice.
  writeFileSync(join(dir, DONE_FILE), '2');
  t.deepEqual([...new HistorySpool<{ n: number }>(dir, 1_000_000).waiting()], [{ n: 3 }, { n: 4 }]);
  // A rewrite cut off before its rename leaves its half-made file beside the spool: it is not read.
  writeFileSync(join(dir, `${SPOOL_FILE}.new`), '{"n":3,"w":{"n":3');
  t.deepEqual([...new HistorySpool<{ n: number }>(dir, 1_000_000).waiting()], [{ n: 3 }, { n: 4 }]);
});

test("a spool written by the version before (lines without numbers, a count of lines done) is taken as it was meant", (t) => {
  const dir = folder();
  writeFileSync(join(dir, SPOOL_FILE), '{"kind":"recovery","botId":"a"}\n{"kind":"recovery","botId":"b"}\n{"kind":"recovery","botId":"c"}\n');
  writeFileSync(join(dir, DONE_FILE), '1');
  const spool = new HistorySpool<{ botId: string }>(dir, 1_000_000);
  t.deepEqual([...spool.waiting()].map((write) => write.botId), ['b', 'c']);
  spool.shift();
  t.deepEqual([...new HistorySpool<{ botId: string }>(dir, 1_000_000).waiting()].map((write) => write.botId), ['c']);
});

test('bounded in bytes, not characters: past its bytes a write is refused and counted as dropped; what waits is kept', (t) => {
  const spool = new HistorySpool<{ text: string }>(undefined, 100);
  t.true(spool.add({ text: 'a'.repeat(40) }));
  // 30 characters, 60 bytes of UTF-8: with the line around it, past the bound.
  t.false(spool.add({ text: 'é'.repeat(30) }));
  t.is(spool.dropped, 1);
  t.is(spool.size, 1);
  t.true(spool.waitingBytes <= 100);
});

test('the file on disk stays within the bound, the lines written already included: it is rewritten before it would pass it', (t) => {
  const dir = folder();
  const max = 20_000;
  const spool = new HistorySpool<{ text: string }>(dir, max);
  let largest = 0;
  for (let n = 0; n < 2_000; n += 1) {
    t.true(spool.add({ text: `${n} ${'ü'.repeat(300)}` }), `write ${n} refused`);
    largest = Math.max(largest, statSync(join(dir, SPOOL_FILE)).size);
    if (spool.size > 10) spool.shift();
  }
  t.true(largest <= max, `the file reached ${largest} bytes`);
  t.true(largest > max / 2, 'the file did grow with lines written already');
  t.is(spool.size, 10);
  t.deepEqual([...new HistorySpool<{ text: string }>(dir, max).waiting()], [...spool.waiting()]);
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
  const lines = readFileSync(join(dir, SPOOL_FILE), 'utf8').split('\n').length - 1;
  t.true(lines <= waiting.length + 1_000, `the file holds ${lines} lines, not all 3,000 ever added`);
  t.deepEqual([...new HistorySpool<{ n: number }>(dir, 10_000_000).waiting()].map((item) => item.n), waiting);
});

test("fair shares: one share's writes hold at most a sixteenth of the spool, all shares leave an eighth to writes of none; held across a restart", (t) => {
  const dir = folder();
  type Write = { bot?: string; pad: string };
  const shareOf = (write: Write) => write.bot;
  const spool = new HistorySpool<Write>(dir, 16_000, undefined, shareOf);
  const write = (bot: string | undefined) => ({ ...(bot === undefined ? {} : { bot }), pad: 'x'.repeat(150) });
  // One bot writing without end (a restart storm during an outage): its share is 1,000 bytes.
  let greedy = 0;
  while (spool.add(write('greedy'))) greedy += 1;
  t.true(greedy >= 5 && greedy <= 6, `${greedy} writes of one bot`);
  t.true(spool.waitingBytes <= 1_000);
  t.is(spool.dropped, 1);
  t.true(spool.add(write('other')), "another bot's write was refused");
  // Many bots together stop at seven eighths: the last eighth is for removals and sign-outs.
  for (let bot = 0; bot < 100; bot += 1) while (spool.add(write(`bot${bot}`)));
  t.true(spool.waitingBytes <= 14_000, `${spool.waitingBytes} bytes of bots' writes`);
  t.true(spool.add(write(undefined)), 'a removal found no room');
  // Opened again after a restart, the shares are what the file holds.
  const reopened = new HistorySpool<Write>(dir, 16_000, undefined, shareOf);
  t.is(reopened.size, spool.size);
  t.false(reopened.add(write('greedy')), 'the greedy bot got past its share after a restart');
  t.true(reopened.add(write(undefined)));
  // Written, a share's bytes are its own again.
  while (reopened.first()?.bot !== 'greedy' && reopened.size > 0) reopened.shift();
  reopened.shift();
  t.true(reopened.add(write('greedy')), 'a written line did not give its bytes back to its share');
});
