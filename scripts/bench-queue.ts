// The webhook queue of the embedded store while its receiver is down: how long one pump's queries
// hold the event loop with N deliveries waiting (N = 50,000 unless given: npm run bench:queue -- 200000).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { SqliteHistoryStore } from '../src/history/sqlite-store.js';

const waiting = Number(process.argv[2] ?? 50_000);
const BOTS = 500;
const dir = mkdtempSync(join(tmpdir(), 'bench-queue-'));
const store = new SqliteHistoryStore(dir);
try {
  await store.transaction(async (tx) => {
    for (let i = 0; i < waiting; i += 1) {
      const event = await tx.appendEvent(`bot_1_${i % BOTS}_q`, 'started', Date.now(), (id) => JSON.stringify({ id }));
      if (event) await tx.addDelivery(event, 0);
    }
  });
  const timed = async (what: string, work: () => Promise<unknown>) => {
    const times: number[] = [];
    for (let round = 0; round < 20; round += 1) {
      const start = performance.now();
      await work();
      times.push(performance.now() - start);
    }
    times.sort((a, b) => a - b);
    console.log(`${what}: median ${times[10]!.toFixed(2)} ms, worst ${times[19]!.toFixed(2)} ms (${waiting.toLocaleString('en')} waiting, ${BOTS} bots)`);
  };
  // Claims lapse at once (hold 0): every round finds the same queue.
  await timed('claim 8 due deliveries', () => store.claimDeliveries(Date.now(), 8, 0));
  await timed('when the next falls due', () => store.nextDeliveryAt());
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
