import test from 'ava';
import { AlertStore } from '../../src/alerts/alert-store.js';
import { openStore } from '../../src/history/open-store.js';
import { dropDatabases, freshDatabase } from '../helpers/postgres.js';

// An alert fires for a bot once per cooldown across every agent that shares the database (docs/api.md §22):
// the claim in PostgreSQL, as several agents make it at once, and in the embedded SQLite.
test.after.always(() => dropDatabases());

for (const dialect of ['postgres', 'sqlite'] as const) {
  test(`${dialect}: of claims made at once one fires; none within the cooldown; one once it has passed; each bot and rule its own`, async (t) => {
    const config = dialect === 'postgres' ? { databaseUrl: await freshDatabase(), dataDir: ':memory:' } : { databaseUrl: undefined, dataDir: ':memory:' };
    // Three agents' stores over one database (SQLite: one agent's store, its claims at once).
    const opened = dialect === 'postgres' ? [0, 1, 2].map(() => openStore(config, () => undefined).store) : [openStore(config, () => undefined).store];
    t.teardown(async () => {
      for (const store of opened) await store.close();
    });
    await Promise.all(opened.map((store) => store.opened()));
    const alerts = opened.map((store) => new AlertStore(store.sql()));
    const rule = await alerts[0]!.add({ name: 'x', kind: 'line', q: 'panic', cooldownS: 60 }, 1_000);
    const at = 1_000_000;
    const claims = await Promise.all(Array.from({ length: 12 }, (_, i) => alerts[i % alerts.length]!.claim(rule.id, 'bot_1', at, 60_000)));
    t.is(claims.filter(Boolean).length, 1);
    t.false(await alerts[0]!.claim(rule.id, 'bot_1', at + 59_999, 60_000));
    t.true(await alerts[alerts.length - 1]!.claim(rule.id, 'bot_1', at + 60_000, 60_000));
    t.true(await alerts[0]!.claim(rule.id, 'bot_2', at + 60_000, 60_000), "another bot's turn is its own");
    t.true(await alerts[0]!.remove(rule.id));
    t.is(await alerts[0]!.get(rule.id), undefined);
    t.false(await alerts[0]!.remove(rule.id));
  });
}
