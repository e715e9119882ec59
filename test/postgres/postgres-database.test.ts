import test from 'ava';
import pg from 'pg';
import { PostgresDatabase } from '../../src/history/postgres-database.js';
import { dropDatabases, freshDatabase } from '../helpers/postgres.js';
import { eventually } from '../helpers/eventually.js';

// The shared database's connections on the real server (docs/operating.md, "Several agents, one history"): one lost in the middle of a
// transaction fails that transaction only; the agent lives on and the next one runs on a new connection.
test.after.always(dropDatabases);

test('a connection the server ends in the middle of a transaction fails that transaction, not the agent; the next one runs', async (t) => {
  const url = await freshDatabase();
  const database = new PostgresDatabase(url);
  t.teardown(() => database.close());
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  t.teardown(() => admin.end());

  let backend = 0;
  let resume = (): void => undefined;
  const paused = new Promise<void>((resolve) => (resume = resolve));
  let began = (): void => undefined;
  const inside = new Promise<void>((resolve) => (began = resolve));
  // Between two statements the connection is lent out and has no statement running: the pool does not listen to it.
  const transaction = database.inTransaction(async (query) => {
    backend = Number((await query('SELECT pg_backend_pid() AS pid')).rows[0]?.pid);
    began();
    await paused;
    await query('SELECT 1');
  });
  await inside;
  await admin.query('SELECT pg_terminate_backend($1)', [backend]);
  t.true(await eventually(async () => (await admin.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [backend])).rowCount === 0, 5_000, 20));
  // The client hears of the end a moment after the server forgot the backend.
  await new Promise((resolve) => setTimeout(resolve, 200));
  resume();
  await t.throwsAsync(transaction);
  const { rows } = await database.inTransaction((query) => query('SELECT 41 + 1 AS answer'));
  t.is(rows[0]?.answer, 42);
});
