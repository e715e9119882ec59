// Schedules at scale (docs/api.md §18, docs/performance.md): N schedules (5,000 unless given: npm run
// bench:schedules -- 20000) in the embedded store, one scheduler over them. At rest: what a tick and a reading of
// every schedule cost, the heap they take and the CPU over 20 s. Then every one due at once: from the due time to each chain's first
// action, p50, p99 and the last, the scheduler's clock moved to the due time at one instant.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { SqliteHistoryStore } from '../src/history/sqlite-store.js';
import { Scheduler } from '../src/schedules/scheduler.js';
import { ScheduleStore } from '../src/schedules/schedule-store.js';
import type { ScheduleSpec } from '../src/schedules/schedule-spec.js';

const count = Number(process.argv[2] ?? 5_000);
const dir = mkdtempSync(join(tmpdir(), 'bench-schedules-'));
const sqlite = new SqliteHistoryStore(dir);
const store = new ScheduleStore(sqlite.sql());
const spec: ScheduleSpec = {
  name: null,
  cron: '0 3 * * *',
  time_zone: 'Europe/Berlin',
  enabled: true,
  only_when_running: false,
  missed: 'skip',
  starting_deadline_s: 600,
  actions: [{ type: 'restart', offset_s: 0, continue_on_failure: false }],
};
const clock = { ms: Date.parse('2026-03-01T00:00:00.000Z') };
const dueMs = Date.parse('2026-03-01T02:00:00.000Z'); // 03:00 in Berlin
let dueAtReal = 0;
const latencies: number[] = [];
const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
const ms = (value: number) => `${value.toFixed(1)} ms`;

try {
  for (let i = 0; i < count; i += 1) await store.create(`sch_${i.toString(16).padStart(16, '0')}`, `bot_1_${i}_bench`, spec, clock.ms);
  global.gc?.();
  const heapBefore = process.memoryUsage().heapUsed;
  const scheduler = new Scheduler(
    store,
    {
      running: async () => true,
      power: async () => {
        latencies.push(performance.now() - dueAtReal);
        return 'ok';
      },
      deploy: async () => 'deployed',
      backup: async () => 'backup made',
      verify: async () => 'verified',
      command: async () => ({ exitCode: 0, output: '', truncated: false, timedOut: false, message: null }),
    },
    async () => undefined,
    () => true,
    (what, err) => console.error(what, err),
    { agent: 'bench', now: () => clock.ms },
  );
  scheduler.start();
  // At rest: the first reading, then ticks over schedules none of which is due.
  await sleep(6_000);
  global.gc?.();
  const heapAtRest = process.memoryUsage().heapUsed - heapBefore;
  const readStart = performance.now();
  await store.enabledHeads();
  const readMs = performance.now() - readStart;
  // The CPU at rest over 20 s: four readings of every schedule and 80 ticks, none due.
  const lag: number[] = [];
  const cpuBefore = process.cpuUsage();
  const restStart = performance.now();
  for (let i = 0; i < 400; i += 1) {
    const asked = performance.now();
    await sleep(50);
    lag.push(performance.now() - asked - 50);
  }
  const cpu = process.cpuUsage(cpuBefore);
  const cpuShare = (cpu.user + cpu.system) / 1000 / (performance.now() - restStart);
  lag.sort((a, b) => a - b);
  console.log(
    `${count.toLocaleString('en')} schedules at rest: ${(heapAtRest / count).toFixed(0)} bytes of heap each (${(heapAtRest / 1024 / 1024).toFixed(1)} MiB), ${(cpuShare * 100).toFixed(1)} % of a core, a reading of them all ${ms(readMs)}, the event loop's lag p99 ${ms(percentile(lag, 0.99))}`,
  );

  dueAtReal = performance.now();
  clock.ms = dueMs + 1;
  while (latencies.length < count && performance.now() - dueAtReal < 600_000) await sleep(20);
  latencies.sort((a, b) => a - b);
  console.log(
    `every one due at once: the first action of each chain ${ms(percentile(latencies, 0.5))} after its due time at p50, ${ms(percentile(latencies, 0.99))} at p99, the last ${ms(latencies.at(-1) ?? NaN)} (${latencies.length} of ${count})`,
  );
  await scheduler.close();
} finally {
  await sqlite.close();
  rmSync(dir, { recursive: true, force: true });
}
