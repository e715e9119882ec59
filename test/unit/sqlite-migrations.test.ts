import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { EXIT_LOG_BYTES } from '../../src/history/history-store.js';
import { migrationsOf } from '../../src/history/migrations.js';
import { OLDEST_PENDING, SqliteHistoryStore } from '../../src/history/sqlite-store.js';

// Every shape of history.sqlite a release wrote (test/fixtures/sqlite-vN.sql, copied from those releases),
// opened by this agent: migrated to the same schema a new file gets, its records still there.
const NEWEST = migrationsOf('sqlite').length;
const RELEASES = [1, 2, 3, 4];

function folder(t: ExecutionContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'history-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A file as release `version` left it, holding one exit (its logs where that release kept them), one event and one delivery. */
function oldStore(dir: string, version: number, logs: string): void {
  const db = new DatabaseSync(join(dir, 'history.sqlite'));
  db.exec(readFileSync(new URL(`../fixtures/sqlite-v${version}.sql`, import.meta.url), 'utf8'));
  const at = Date.now() - 1_000;
  const record = { at: new Date(at).toISOString(), exit_code: 3, signal: null, oom_killed: false, requested: false, started_at: null };
  if (version < 3) {
    db.prepare('INSERT INTO exits (bot_id, at_ms, requested, record, run_key) VALUES (?, ?, 0, ?, ?)').run('bot_1_1_a', at, JSON.stringify({ ...record, logs }), 'run-1');
  } else {
    db.prepare('INSERT INTO exits (bot_id, at_ms, requested, record, run_key, logs) VALUES (?, ?, 0, ?, ?, ?)').run('bot_1_1_a', at, JSON.stringify(record), 'run-1', logs);
  }
  db.prepare("INSERT INTO events (bot_id, type, at_ms, data, run_key) VALUES ('bot_1_1_a', 'exited', ?, '{\"id\":\"1\"}', 'run-1')").run(at);
  db.prepare("INSERT INTO deliveries (seq, bot_id, type, data, next_at_ms, first_at_ms) VALUES (1, 'bot_1_1_a', 'exited', '{\"id\":\"1\"}', 0, 0)").run();
  db.close();
}

/** Every table's columns and every index, as SQLite describes them: what two files must share to be the same schema. */
function schemaOf(dir: string): unknown {
  const db = new DatabaseSync(join(dir, 'history.sqlite'), { readOnly: true });
  const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all();
  const shape = {
    tables: Object.fromEntries(tables.map(({ name }) => [name, db.prepare(`PRAGMA table_info(${String(name)})`).all().map((c) => [c.name, c.type, c.notnull, c.dflt_value, c.pk])])),
    indexes: db.prepare("SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%' ORDER BY name").all(),
    versions: tables.some(({ name }) => name === 'schema_version') ? db.prepare('SELECT version, name FROM schema_version ORDER BY version').all() : [],
  };
  db.close();
  return shape;
}

test('a new file gets every migration, numbered from 1', async (t) => {
  const dir = folder(t);
  await new SqliteHistoryStore(dir).close();
  const { versions } = schemaOf(dir) as { versions: { version: number }[] };
  t.deepEqual(versions.map((row) => row.version), Array.from({ length: NEWEST }, (_, at) => at + 1));
});

for (const version of RELEASES) {
  test(`a file of the release at schema ${version} (no version table) is migrated to the newest schema, its history kept`, async (t) => {
    const fresh = folder(t);
    await new SqliteHistoryStore(fresh).close();
    const dir = folder(t);
    oldStore(dir, version, 'connected\nbye\n');
    const store = new SqliteHistoryStore(dir);
    const [exit] = await store.exits('bot_1_1_a', 50);
    t.like(exit, { exit_code: 3, logs: 'connected\nbye\n' });
    t.deepEqual((await store.eventsAfter(0, undefined, 10)).map((event) => event.data), ['{"id":"1"}']);
    t.deepEqual((await store.claimDeliveries(Date.now(), 10, 1_000)).map((delivery) => delivery.seq), [1], 'the queue waits as it did');
    await store.forget('bot_1_1_b', Date.now());
    await store.close();
    const migrated = schemaOf(dir) as { versions: unknown[] };
    t.deepEqual(migrated, schemaOf(fresh), 'the same tables, columns and indexes as a new file');
    // Opened again: nothing is applied twice.
    await new SqliteHistoryStore(dir).close();
    t.deepEqual(schemaOf(dir), migrated);
  });
}

test('the first releases kept logs inside each record: they move to their column, bounded, the newest 50 of a bot keeping them', async (t) => {
  const dir = folder(t);
  oldStore(dir, 1, 'first\n');
  const db = new DatabaseSync(join(dir, 'history.sqlite'));
  const insert = db.prepare('INSERT INTO exits (bot_id, at_ms, requested, record, run_key) VALUES (?, ?, 0, ?, ?)');
  const huge = `${'\x01'.repeat(100_000)}\nthe end\n`;
  for (let i = 0; i < 55; i += 1) {
    const at = Date.now() - 1_000 + i;
    insert.run('bot_1_1_b', at, JSON.stringify({ at: new Date(at).toISOString(), exit_code: i, signal: null, oom_killed: false, requested: false, started_at: null, logs: huge }), `run-b-${i}`);
  }
  db.close();
  const store = new SqliteHistoryStore(dir);
  t.teardown(() => store.close());
  const exits = await store.exits('bot_1_1_b', 50);
  t.is(exits.length, 50);
  t.is(exits[0]!.exit_code, 54);
  t.true(exits.every((exit) => exit.logs.endsWith('the end\n') && Buffer.byteLength(JSON.stringify(exit.logs)) - 2 <= EXIT_LOG_BYTES));
});

test('a migration that fails leaves the file as it was: nothing half applied', async (t) => {
  const dir = folder(t);
  oldStore(dir, 3, 'kept\n');
  // A table in the way of migration 5's index name: its CREATE INDEX fails.
  const db = new DatabaseSync(join(dir, 'history.sqlite'));
  db.exec('CREATE TABLE deliveries_by_bot (x INTEGER)');
  db.close();
  const before = schemaOf(dir);
  t.throws(() => new SqliteHistoryStore(dir), { message: /deliveries_by_bot/ });
  t.deepEqual(schemaOf(dir), before);
});

test("the webhook queue finds each bot's oldest pending delivery by index, not by scanning the queue once a row", (t) => {
  const dir = folder(t);
  const store = new SqliteHistoryStore(dir);
  t.teardown(() => store.close());
  const db = new DatabaseSync(join(dir, 'history.sqlite'), { readOnly: true });
  t.teardown(() => db.close());
  // What claimDeliveries and nextDeliveryAt ask on every pump, while a receiver that is down lets the queue grow.
  const plan = db.prepare(`EXPLAIN QUERY PLAN ${OLDEST_PENDING}`).all().map((row) => String(row.detail));
  t.deepEqual(plan, ['SCAN deliveries USING COVERING INDEX deliveries_by_bot'], 'one pass over the index, no sort of the queue');
});
