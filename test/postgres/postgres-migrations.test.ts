import { readFileSync } from 'node:fs';
import test from 'ava';
import pg from 'pg';
import { migrationsOf } from '../../src/history/migrations.js';
import { openStore } from '../../src/history/open-store.js';
import { dropDatabases, freshDatabase } from '../helpers/postgres.js';

// Every shape of the shared database a release wrote (test/fixtures/postgres-vN.sql, copied from those
// releases), opened by this agent on the real server: migrated to what a new database gets, its history kept.
const NEWEST = migrationsOf('postgres').length;

test.after.always(dropDatabases);

async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** Every table's columns and every index of the database, and the migrations it has had. */
function schemaOf(url: string): Promise<unknown> {
  return withClient(url, async (client) => ({
    columns: (
      await client.query(
        "SELECT table_name, column_name, data_type, is_nullable, column_default FROM information_schema.columns WHERE table_schema = 'public' ORDER BY 1, 2",
      )
    ).rows,
    indexes: (await client.query("SELECT tablename, indexname FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1, 2")).rows,
    versions: (await client.query('SELECT version, name FROM schema_version ORDER BY version')).rows,
  }));
}

async function open(url: string): Promise<void> {
  const { store } = openStore({ databaseUrl: url, dataDir: ':memory:' }, () => undefined);
  await store.opened();
  await store.close();
}

test('a new database gets every migration, numbered from 1; agents opening it at once migrate it once', async (t) => {
  const url = await freshDatabase();
  await Promise.all([open(url), open(url), open(url)]);
  const { versions } = (await schemaOf(url)) as { versions: { version: number }[] };
  t.deepEqual(versions.map((row) => row.version), Array.from({ length: NEWEST }, (_, at) => at + 1));
});

for (const version of [1, 2]) {
  test(`a database of the release at schema ${version} (no version table) is migrated to the newest schema, its history kept`, async (t) => {
    const fresh = await freshDatabase();
    await open(fresh);
    const url = await freshDatabase();
    await withClient(url, async (client) => {
      await client.query(readFileSync(new URL(`../fixtures/postgres-v${version}.sql`, import.meta.url), 'utf8'));
      await client.query(
        "INSERT INTO exits (bot_id, at_ms, requested, record, run_key, logs) VALUES ('bot_1_1_a', $1, false, $2, 'run-1', 'bye\n')",
        [Date.now(), JSON.stringify({ at: new Date().toISOString(), exit_code: 3, signal: null, oom_killed: false, requested: false, started_at: null })],
      );
      await client.query("UPDATE event_counter SET n = 7");
      await client.query("INSERT INTO events (seq, bot_id, type, at_ms, data, run_key) VALUES (7, 'bot_1_1_a', 'exited', 1, '{}', 'run-1')");
    });
    const { store, sharedWindow } = openStore({ databaseUrl: url, dataDir: ':memory:' }, () => undefined);
    t.like((await store.exits('bot_1_1_a', 1))[0], { exit_code: 3, logs: 'bye\n' });
    t.is((await store.appendEvent('bot_1_1_a', 'started', 2, (id) => id))?.seq, 8, 'cursors go on from where they were');
    t.is(await sharedWindow!('platform bot_1_1_a', 1, 60_000, Date.now()), undefined, 'the rate window has its table');
    await store.close();
    t.deepEqual(await schemaOf(url), await schemaOf(fresh));
  });
}
