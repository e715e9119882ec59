import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { brotliCompressSync, zstdDecompressSync } from 'node:zlib';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { LogStore } from '../../src/log-history/log-store.js';
import { masker } from '../../src/log-history/log-collector.js';
import { lineMatcher } from '../../src/log-history/line-match.js';
import { allPages, historySearch } from '../helpers/log-pages.js';

// The log history's store (docs/api.md §21) on a real SQLite file: lines written, packed into compressed chunks,
// searched and paged across the packing, dropped by the retention, forgotten, and whole after a SIGKILL.
const T0 = Date.parse('2026-12-01T00:00:00Z');

async function storeIn(t: ExecutionContext): Promise<{ store: LogStore; dir: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'log-store-'));
  const store = new LogStore(dir, (what, err) => t.log(what, String(err)));
  t.teardown(async () => {
    await store.close().catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });
  return { store, dir };
}

const search = historySearch;

test('lines are found newest or oldest first, by text, regex-free substring, stream, run and time, across the packing into chunks', async (t) => {
  const { store } = await storeIn(t);
  for (let i = 0; i < 5_000; i++) {
    store.append('bot_1', [{ at: T0 + Math.floor(i / 3), run: i < 2_500 ? T0 : T0 + 833, stream: i % 10 === 0 ? 'stderr' : 'stdout', text: `line ${i} ${i % 7 === 0 ? 'Too Many Requests' : 'fine'}` }]);
  }
  store.append('bot_2', [{ at: T0, run: null, stream: 'stdout', text: 'another bot line 0 Too Many Requests' }]);
  // Packed: 5,000 lines are two full chunks and a part left recent.
  await store.flush(T0);
  t.true(store.packedSize().lines >= 4_000, JSON.stringify(store.packedSize()));
  const newest = await store.search('bot_1', search({ limit: 3 }));
  t.deepEqual(newest.lines.map((line) => line.text), ['line 4999 fine', 'line 4998 Too Many Requests', 'line 4997 fine']);
  const oldest = await store.search('bot_1', search({ limit: 2, order: 'oldest' }));
  t.deepEqual(oldest.lines.map((line) => line.text), ['line 0 Too Many Requests', 'line 1 fine']);
  const matching = await allPages(store, 'bot_1', { match: (text) => text.includes('Too Many'), mustContain: 'Too Many', limit: 100 });
  t.is(matching.length, Math.ceil(5_000 / 7));
  t.is((await allPages(store, 'bot_1', { stream: 'stderr', limit: 333 })).length, 500);
  t.is((await allPages(store, 'bot_1', { run: T0 + 833, limit: 700 })).length, 2_500);
  const window = await allPages(store, 'bot_1', { since: T0 + 100, until: T0 + 200, order: 'oldest' });
  t.is(window.length, 300);
  t.true(window.every((line) => line.at >= T0 + 100 && line.at < T0 + 200));
  t.is((await allPages(store, 'bot_2', {})).length, 1, "another bot's lines are its own");
});

test('chunks are packed with zstd, and chunks an earlier version packed with brotli are read as ever', async (t) => {
  const { store, dir } = await storeIn(t);
  for (let i = 0; i < 4_500; i++) store.append('bot_1', [{ at: T0 + i, run: T0, stream: 'stdout', text: `line ${i}` }]);
  await store.flush(T0);
  await store.close();
  const file = new DatabaseSync(join(dir, 'log-history.sqlite'));
  const chunks = file.prepare('SELECT id, body FROM chunks').all() as Array<{ id: number; body: Uint8Array }>;
  t.true(chunks.length >= 2);
  t.true(chunks.every((chunk) => Buffer.from(chunk.body).subarray(0, 4).equals(Buffer.from([0x28, 0xb5, 0x2f, 0xfd]))), 'zstd frames');
  // The first chunk as an earlier version kept it.
  file.prepare('UPDATE chunks SET body = ? WHERE id = ?').run(brotliCompressSync(zstdDecompressSync(chunks[0]!.body)), chunks[0]!.id);
  file.close();
  const reopened = new LogStore(dir, (what, err) => t.log(what, String(err)));
  t.teardown(() => reopened.close());
  const lines = await allPages(reopened, 'bot_1', { order: 'oldest', limit: 1_000 });
  t.is(lines.length, 4_500);
  t.deepEqual(lines.slice(0, 2).map((line) => line.text), ['line 0', 'line 1']);
});

test('a regular expression finds in packed chunks what it finds line by line, anchors at each line included; a chunk with no match is passed over whole', async (t) => {
  const { store } = await storeIn(t);
  for (let i = 0; i < 4_500; i++) store.append('bot_1', [{ at: T0 + i, run: T0, stream: 'stdout', text: `line ${i} ${i % 1_000 === 7 ? 'rare' : 'common'}` }]);
  await store.flush(T0);
  for (const pattern of ['^line \\d+7 rare$', 'rare$', '\\brare', '(?i)RARE', '\\Aline 7 ', 'line 1007 rare\\z', '(?-m)^line 2007']) {
    const match = lineMatcher(undefined, pattern)!;
    const lineByLine = await allPages(store, 'bot_1', { match: (text) => match(text), limit: 1_000 });
    const joined = await allPages(store, 'bot_1', { match, limit: 1_000 });
    t.deepEqual(joined.map((line) => line.text), lineByLine.map((line) => line.text), pattern);
    t.true(joined.length >= 1, pattern);
  }
  const rare = lineMatcher(undefined, 'rare')!;
  t.false(rare.anyOf!('line 1 common\nline 2 common'));
  t.true(rare.anyOf!('line 1 common\nline 7 rare'));
  t.is(lineMatcher(undefined, '\\Aline')!.anyOf, undefined, "a pattern of the text's own ends is matched line by line alone");
});

test('pages go on from their cursor with every line once, while lines arrive and are packed between pages, in either order', async (t) => {
  const { store } = await storeIn(t);
  let next = 0;
  const add = (count: number): void => {
    for (let i = 0; i < count; i++, next++) store.append('bot_1', [{ at: T0 + next * 10, run: null, stream: 'stdout', text: `n${next}` }]);
  };
  add(3_000);
  await store.flush(T0);
  for (const order of ['newest', 'oldest'] as const) {
    const seen = await allPages(store, 'bot_1', { order, limit: 97, until: T0 + 3_000 * 10 }, async () => {
      add(50);
      await store.flush(T0 + 10 * 60_000);
    });
    const texts = seen.map((line) => line.text);
    t.is(new Set(texts).size, texts.length, 'no line twice');
    t.is(texts.length, 3_000, order);
  }
});

test('a search past its time budget answers what it found, says so, and its cursor goes on with nothing lost or repeated', async (t) => {
  const { store } = await storeIn(t);
  for (let i = 0; i < 8_000; i++) store.append('bot_1', [{ at: T0 + i, run: null, stream: 'stdout', text: `n${i}` }]);
  await store.flush(T0);
  const first = await store.search('bot_1', search({ budgetMs: 0, match: (text) => text.endsWith('0') }));
  t.true(first.partial);
  t.not(first.next, undefined);
  const rest = await allPages(store, 'bot_1', { after: first.next, match: (text) => text.endsWith('0') });
  const all = [...first.lines, ...rest].map((line) => line.text);
  t.is(all.length, 800);
  t.is(new Set(all).size, 800);
});

test("an answer's lines stay within its bytes, and the next page begins after its last line", async (t) => {
  const { store } = await storeIn(t);
  for (let i = 0; i < 100; i++) store.append('bot_1', [{ at: T0 + i, run: null, stream: 'stdout', text: 'x'.repeat(1_000) }]);
  const page = await store.search('bot_1', search({ maxBytes: 10_500 }));
  t.is(page.lines.length, 10);
  t.deepEqual(page.next, { at: page.lines[9]!.at, seq: page.lines[9]!.seq });
});

test('the retention drops the oldest chunks past the days, a bot\'s bytes and all bytes, and says what went of whom', async (t) => {
  const { store } = await storeIn(t);
  const day = 86_400_000;
  for (const [botId, base] of [['bot_old', T0 - 10 * day], ['bot_big', T0], ['bot_small', T0]] as const) {
    const count = botId === 'bot_small' ? 2_000 : 6_000;
    for (let i = 0; i < count; i++) store.append(botId, [{ at: base + i, run: null, stream: 'stdout', text: `${botId} ${i} ${Math.random().toString(36)}` }]);
  }
  await store.flush(T0);
  const dropped = store.enforce({ days: 7, botBytes: 1.5 * Math.max(...[0, 1, 2].map(() => store.bytesOf('bot_big') / 3)), totalBytes: Infinity }, T0 + 1_000);
  t.like(dropped.find((drop) => drop.botId === 'bot_old'), { lines: 6_000, why: 'days', fromAt: T0 - 10 * day });
  t.like(dropped.find((drop) => drop.botId === 'bot_big'), { why: 'bytes', fromAt: T0 });
  t.is((await allPages(store, 'bot_old', {})).length, 0);
  const big = await allPages(store, 'bot_big', { order: 'oldest' });
  t.true(big.length > 0 && big.length < 6_000);
  t.is(big[0]!.text.split(' ')[1], String(6_000 - big.length), 'the oldest went first');
  // All bytes past the bound: the oldest of all go first, bot_small's (from T0) before bot_big's later ones.
  const smallBytes = store.bytesOf('bot_small');
  const overAll = store.enforce({ days: 7, botBytes: Infinity, totalBytes: store.bytesOf('bot_big') + smallBytes - 1 }, T0 + 1_000);
  t.deepEqual(overAll.map((drop) => drop.botId), ['bot_small']);
  t.is((await allPages(store, 'bot_small', {})).length, 0);
});

test("a bot forgotten has no line left, and one packed while it was forgotten keeps none", async (t) => {
  const { store } = await storeIn(t);
  for (let i = 0; i < 3_000; i++) store.append('bot_1', [{ at: T0 + i, run: null, stream: 'stdout', text: `n${i}` }]);
  const packing = store.flush(T0);
  store.forget('bot_1');
  await packing;
  t.is((await allPages(store, 'bot_1', {})).length, 0);
  t.is(store.packedSize().lines, 0);
});

test('secrets are masked, the longest first', (t) => {
  const mask = masker(['tok-12345678', 'tok-12345678-long', 'short']);
  t.is(mask('a tok-12345678-long and tok-12345678 but short'), 'a *** and *** but short');
});

test("a JWT is masked by its shape, known or not (a pod's projected token on Kubernetes); text that only looks alike stays", (t) => {
  const part = (json: object) => Buffer.from(JSON.stringify(json)).toString('base64url');
  const jwt = `${part({ alg: 'RS256', kid: 'k1' })}.${part({ aud: ['bot-agent'], sub: 'system:serviceaccount:bots:default' })}.${'s1gnature_-'.repeat(8)}`;
  const mask = masker([]);
  t.is(mask(`token=${jwt} then more`), 'token=*** then more');
  t.is(mask('eyJ alone, eyJabc.eyJdef.ghi too short'), 'eyJ alone, eyJabc.eyJdef.ghi too short');
});

test('SIGKILLed while it writes and packs, the store opens again with every line it kept once, in order, and loses at most the last second', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'log-store-kill-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  // A writer of its own process: 400 lines every 20 ms, numbered; the store flushes each second and packs at 2,000.
  const writer = spawn(process.execPath, ['--import=tsx', '--input-type=module', '-e', `
    import { LogStore } from ${JSON.stringify(new URL('../../src/log-history/log-store.js', import.meta.url).pathname.replace(/\.js$/, '.ts'))};
    const store = new LogStore(${JSON.stringify(dir)}, () => {});
    store.start();
    let n = 0;
    setInterval(() => {
      for (let i = 0; i < 400; i++, n++) store.append('bot_1', [{ at: Date.now(), run: null, stream: 'stdout', text: 'n' + n }]);
      process.stdout.write(n + '\\n');
    }, 20);
  `], { stdio: ['ignore', 'pipe', 'inherit'], cwd: process.cwd() });
  let written = 0;
  writer.stdout.on('data', (chunk: Buffer) => (written = Number(chunk.toString().trim().split('\n').at(-1))));
  await new Promise((resolve) => setTimeout(resolve, 4_500));
  writer.kill('SIGKILL');
  await new Promise((resolve) => writer.once('exit', resolve));
  const store = new LogStore(dir, (what, err) => t.log(what, String(err)));
  t.teardown(() => store.close());
  const kept = (await allPages(store, 'bot_1', { order: 'oldest', limit: 1_000 })).map((line) => Number(line.text.slice(1)));
  t.true(kept.length > 0, 'nothing was kept');
  t.deepEqual(kept, kept.map((_, i) => i), 'every line once, in order, from the first');
  // A second's lines (50 rounds of 400) at most were not yet written.
  t.true(written - kept.length <= 20_000 + 400, `${written} written, ${kept.length} kept`);
});

test("the lines a log database never took are found again, packed or recent, in the order they were kept; past the bound, each bot's rest is a gap", async (t) => {
  const { store, dir } = await storeIn(t);
  t.deepEqual(store.unshipped(10), { lines: [], left: [] }, 'a store never shipped from begins at its last line');
  store.markShipped(0);
  // Two bots, their lines kept in turn: bot_1's 2,500 pack into a chunk of 2,000 and 500 recent ones.
  for (let i = 0; i < 2_500; i++) {
    store.append('bot_1', [{ at: T0 + i, run: null, stream: 'stdout', text: `a${i}` }]);
    if (i % 10 === 0) store.append('bot_2', [{ at: T0 + i, run: null, stream: 'stderr', text: `b${i}` }]);
  }
  await store.flush(T0);
  t.true(store.packedSize().lines >= 2_000, 'a chunk was packed');
  store.markShipped(100);
  const all = store.unshipped(10_000);
  t.is(all.lines.length, 2_750 - 100);
  t.deepEqual(all.lines.map((line) => line.seq), all.lines.map((_, i) => 101 + i), 'every line past the mark, once, in the order kept');
  t.deepEqual(all.left, []);
  const bounded = store.unshipped(1_000);
  const seqs = bounded.lines.map((line) => line.seq);
  t.is(seqs.length, 1_000);
  t.deepEqual(seqs, [...new Set(seqs)].sort((a, b) => a - b), 'in the order kept, each once');
  t.true(seqs[0]! > 100);
  const left = Object.fromEntries(bounded.left.map((gap) => [gap.botId, gap.lines]));
  t.is((left.bot_1 ?? 0) + (left.bot_2 ?? 0), 2_750 - 100 - 1_000, "the rest, each bot's as a gap");
  t.true((left.bot_2 ?? 0) > 0);
  // The mark outlives the store: a store opened again finds the same lines.
  store.markShipped(2_700);
  await store.close();
  const again = new LogStore(dir, (what, err) => t.log(what, String(err)));
  t.teardown(() => again.close());
  t.is(again.unshipped(100).lines.length, 50);
  again.forgetShipping();
  t.deepEqual(again.unshipped(100).lines, [], 'a database configured again begins at the last line');
});
