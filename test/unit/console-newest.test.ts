import test from 'ava';
import { newestOnly } from '../../console/newest.js';

// The console reads a bot's page again at each event (docs/console.md); answers that come back out of order must
// not put an older state over a newer one.
test("of reads whose answers come back out of order, only the newest read's answer is taken", async (t) => {
  const turn = newestOnly();
  const shown: string[] = [];
  const read = async (answer: string, afterMs: number) => {
    const newest = turn();
    await new Promise((resolve) => setTimeout(resolve, afterMs));
    if (newest()) shown.push(answer);
  };
  // The read begun first (before the deploy's outcome was kept) answers last.
  await Promise.all([read('deploying', 60), read('succeeded', 10)]);
  t.deepEqual(shown, ['succeeded']);
  await read('rolled-back', 0);
  t.deepEqual(shown, ['succeeded', 'rolled-back']);
});
