import test from 'ava';
import { countedAtMostEvery } from '../../src/http/metrics.js';

// /metrics needs no credentials: its crash-loop figure is a database query, asked at most once every 5 s (docs/api.md §7).
test('a thousand scrapes at once and within the interval are one count; past it, one more, read in the background', async (t) => {
  let now = 0;
  let counts = 0;
  let release: (value: number) => void = () => undefined;
  const figure = countedAtMostEvery(5_000, () => {
    counts += 1;
    return new Promise<number>((resolve) => (release = resolve));
  }, () => now);
  const first = Array.from({ length: 1_000 }, () => figure());
  t.is(counts, 1);
  release(3);
  t.deepEqual(new Set(await Promise.all(first)), new Set([3]));
  now = 4_999;
  t.is(figure(), 3);
  t.is(counts, 1);
  now = 5_000;
  // Stale: the figure before is answered at once, and one count is asked, however many scrapes come meanwhile.
  t.is(figure(), 3);
  t.is(figure(), 3);
  t.is(counts, 2);
  release(4);
  await new Promise((resolve) => setImmediate(resolve));
  t.is(figure(), 4);
});

test('a count that fails leaves the figure before standing, and is asked again once the interval is over', async (t) => {
  let now = 0;
  let fail = false;
  const figure = countedAtMostEvery(5_000, () => (fail ? Promise.reject(new Error('database away')) : Promise.resolve(7)), () => now);
  t.is(await figure(), 7);
  fail = true;
  now = 6_000;
  t.is(figure(), 7);
  await new Promise((resolve) => setImmediate(resolve));
  t.is(figure(), 7);
  const never = countedAtMostEvery(5_000, () => Promise.reject(new Error('database away')));
  await t.throwsAsync(async () => never(), { message: 'not counted yet' });
});
