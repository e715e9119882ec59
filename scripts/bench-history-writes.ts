// The events history's write path under a burst (docs/performance.md): BURST bots crash five times each and start
// again, every end and start handed to the history at once, as a watch hands a burst on. On the embedded store (one
// agent) and on PostgreSQL (two agents sharing it, each told of every run, as two agents watching one cluster are):
// from the first write to the last event reaching an agent's followers (its event stream), and a status read's
// history (`record`) timed 200 times a second meanwhile. BOT_AGENT_DATABASE_URL (scripts/postgres.sh): the server.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { BotHistory } from '../src/history/bot-history.js';
import type { HistoryStore } from '../src/history/history-store.js';
import { PostgresDatabase } from '../src/history/postgres-database.js';
import { PostgresHistoryStore } from '../src/history/postgres-store.js';
import { SqliteHistoryStore } from '../src/history/sqlite-store.js';
import type { BotInfo } from '../src/runtime/driver.js';
import { SharedState } from '../src/shared/shared-state.js';
import type { SharedStateStore } from '../src/shared/shared-state.js';
import { dropDatabases, freshDatabase } from '../test/helpers/postgres.js';
import { percentiles, round } from './bench-scale.js';
import { writeSection } from './bench-sections.js';

const BURST = 500;
const CRASHES = 5;
const READS_PER_SECOND = 200;

type AgentStore = HistoryStore & SharedStateStore;
const info = (id: string) =>
  ({ id, ownerId: 'user_1', running: true, startedAt: undefined, health: 'none', healthPolicy: { graceMs: undefined, heartbeatTtlMs: undefined } }) as unknown as BotInfo;

interface Figures {
  events: number;
  lastEventMs: number;
  reads: { p50: number; p99: number };
}

/** Every agent told of every run end and start of the burst at once; the first agent's followers timed. */
async function burst(stores: AgentStore[]): Promise<Figures> {
  const histories = stores.map((store) => new BotHistory(store, new SharedState(store), async (id) => info(id), { deliver: true }));
  const bots = Array.from({ length: BURST }, (_, i) => `bot_9_${i}_burst`);
  const base = Date.now() - CRASHES * 3_000;
  let events = 0;
  let lastEventAt = 0;
  histories[0]!.follow(() => {
    events += 1;
    lastEventAt = performance.now();
  });
  const times: number[] = [];
  let writing = true;
  const reads = (async () => {
    const start = performance.now();
    for (let n = 0; writing; n++) {
      const wait = start + (n * 1000) / READS_PER_SECOND - performance.now();
      if (wait > 1) await sleep(wait);
      const began = performance.now();
      void histories[n % histories.length]!.record(bots[(n * 7919) % BURST]!, new Date()).then(() => times.push(performance.now() - began));
    }
  })();
  const started = performance.now();
  const writes: Array<Promise<void>> = [];
  for (let crash = 0; crash < CRASHES; crash++) {
    for (const botId of bots) {
      const startedAt = new Date(base + crash * 3_000);
      const at = new Date(startedAt.getTime() + 2_500);
      for (const history of histories) {
        writes.push(history.ended({ botId, key: `${botId}:${crash}`, at, exitCode: 1, oomKilled: false, requested: false, startedAt, logs: 'boom\n' }));
        writes.push(history.started({ botId, key: `${botId}:${crash + 1}`, startedAt: at }));
      }
    }
  }
  await Promise.all(writes);
  // The last agent's writes may come after the first's: its followers hear of them through the store.
  for (let quiet = events; ; quiet = events) {
    await sleep(500);
    if (events === quiet) break;
  }
  writing = false;
  await reads;
  for (const history of histories) await history.close();
  return { events, lastEventMs: lastEventAt - started, reads: percentiles(times) };
}

const row = (what: string, figures: Figures) =>
  `| ${what} | ${figures.events} events, the last ${round(figures.lastEventMs / 1000, 2)} s after the first write | p50 ${figures.reads.p50} ms, p99 ${figures.reads.p99} ms |`;

const dir = mkdtempSync(join(tmpdir(), 'bench-history-writes-'));
const rows: string[] = [];
try {
  const sqlite = new SqliteHistoryStore(dir);
  rows.push(row('embedded (SQLite), one agent', await burst([sqlite])));
  await sqlite.close();
  if (process.env.BOT_AGENT_DATABASE_URL) {
    const url = await freshDatabase();
    const report = (what: string, err: unknown) => console.error(what, err);
    const stores = [0, 1].map(() => new PostgresHistoryStore(new PostgresDatabase(url, report), report));
    for (const store of stores) await store.opened();
    rows.push(row('PostgreSQL, two agents each told of every run', await burst(stores)));
    for (const store of stores) await store.close();
    await dropDatabases();
  } else console.error('bench:history-writes: BOT_AGENT_DATABASE_URL is not set (scripts/postgres.sh): PostgreSQL is not measured');
} finally {
  rmSync(dir, { recursive: true, force: true });
}
const body = [
  `## The events history under a burst (\`npm run bench:history-writes\`)`,
  '',
  `Made on ${new Date().toISOString().slice(0, 10)}: ${BURST} bots crash ${CRASHES} times each, every end and start handed to the history at once (${BURST * CRASHES} ends, as many starts), webhooks on (a delivery queued per event). ` +
    `Meanwhile the history a status read takes is read ${READS_PER_SECOND} times a second. Goal: the burst's events all streamed within 5 s; a read's p99 under 50 ms.`,
  '',
  '| store | streamed | status read meanwhile |',
  '|---|---|---|',
  ...rows,
].join('\n');
console.log(writeSection('history-writes', body));
process.exit(0);
