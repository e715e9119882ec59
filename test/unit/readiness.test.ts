import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { Readiness } from '../../src/http/readiness.js';

// What /readyz asks of the runtime (docs/api.md §2): a flood of probes is one ping at a time, never a stale answer.
function countingRuntime(ms: number, fails = false) {
  const runtime = {
    runtime: 'docker' as const,
    pings: 0,
    async ping(): Promise<void> {
      runtime.pings += 1;
      await sleep(ms);
      if (fails) throw new Error('engine gone');
    },
  };
  return runtime;
}

for (const graceMs of [0, 30_000]) {
  test(`checks at once share the ping under way; a check after it settles pings again (grace ${graceMs} ms)`, async (t) => {
    const runtime = countingRuntime(100);
    const readiness = new Readiness(runtime, graceMs);
    const answers = await Promise.all(Array.from({ length: 50 }, () => readiness.check()));
    t.deepEqual(new Set(answers), new Set(['docker runtime reachable']));
    t.is(runtime.pings, 1);
    await readiness.check();
    t.is(runtime.pings, 2, 'an answer is never reused once its ping settled');
  });
}

test('checks at once of a runtime that fails share its one failed ping: each is refused', async (t) => {
  const runtime = countingRuntime(50, true);
  const readiness = new Readiness(runtime, 0);
  const results = await Promise.allSettled(Array.from({ length: 20 }, () => readiness.check()));
  t.true(results.every((result) => result.status === 'rejected'));
  t.is(runtime.pings, 1);
});
