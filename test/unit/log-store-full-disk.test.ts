import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { LogStore } from '../../src/log-history/log-store.js';
import type { HistorySearch } from '../../src/log-history/log-store.js';

const run = promisify(execFile);
const T0 = Date.parse('2026-12-01T00:00:00Z');
const everything: HistorySearch = { order: 'oldest', limit: 1_000, maxBytes: Infinity, lineBytes: () => 1, budgetMs: Infinity };

// The log history on a disk that fills up (docs/api.md §21): a real file system of 2 MiB (tmpfs, as root in npm test).
test('on a full disk the lines are dropped and counted, searches still answer, and lines are kept again once there is room', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'log-store-full-'));
  await run('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', dir]);
  const reports: string[] = [];
  const store = new LogStore(dir, (what) => reports.push(what));
  t.teardown(async () => {
    await store.close().catch(() => undefined);
    await run('umount', [dir]);
    await rm(dir, { recursive: true, force: true });
  });
  store.append('bot_1', Array.from({ length: 100 }, (_, i) => ({ at: T0 + i, run: T0, stream: 'stdout' as const, text: `before ${i}` })));
  await store.flush(T0);
  t.is(store.kept, 100);

  // Every byte left taken by a file of someone else's.
  const filler = join(dir, 'filler');
  let size = 2 * 1024 * 1024;
  for (; size > 0; size -= 16 * 1024) {
    if (await writeFile(filler, Buffer.alloc(size)).then(() => true, () => false)) break;
  }
  for (let i = 0; i < 64 && (await writeFile(join(dir, `more-${i}`), Buffer.alloc(4096)).then(() => true, () => false)); i++);

  const text = 'x'.repeat(200);
  store.append('bot_1', Array.from({ length: 2_000 }, (_, i) => ({ at: T0 + 1_000 + i, run: T0, stream: 'stdout' as const, text: `during ${i} ${text}` })));
  await store.flush(T0 + 1_000);
  t.is(store.dropped, 2_000, 'the lines that could not be written are counted');
  t.true(reports.some((what) => /log lines could not be kept/.test(what)), reports.join('; '));
  const meanwhile = await store.search('bot_1', everything);
  t.is(meanwhile.lines.length, 100, 'what was kept is still found');

  await rm(filler);
  store.append('bot_1', [{ at: T0 + 5_000, run: T0, stream: 'stdout', text: 'after the disk had room again' }]);
  await store.flush(T0 + 5_000);
  const after = await store.search('bot_1', everything);
  t.deepEqual(after.lines.map((line) => line.text).slice(-1), ['after the disk had room again']);
  t.is(after.lines.length, 101);
});
