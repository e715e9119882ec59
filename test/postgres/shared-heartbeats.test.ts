import test from 'ava';
import { BEATS_SHARED_EVERY_MS, Heartbeats } from '../../src/health/heartbeats.js';
import { openStore } from '../../src/history/open-store.js';
import { dropDatabases, freshDatabase } from '../helpers/postgres.js';
import { eventually } from '../helpers/eventually.js';

// Heartbeats across agents over a real PostgreSQL (docs/api.md §13): a bot's beats reach whichever agent
// it calls; the others learn of them within two rounds, each round one statement each way, no write per beat.
test.after.always(dropDatabases);

async function twoAgents(t: { teardown(fn: () => Promise<void>): void }) {
  const url = await freshDatabase();
  const opened = [openStore({ databaseUrl: url, dataDir: ':memory:' }, () => undefined), openStore({ databaseUrl: url, dataDir: ':memory:' }, () => undefined)];
  await Promise.all(opened.map(({ store }) => store.opened()));
  const beats = opened.map(({ sharedBeats }) => new Heartbeats(sharedBeats));
  for (const heartbeats of beats) heartbeats.start();
  t.teardown(async () => {
    for (const heartbeats of beats) await heartbeats.close();
    for (const { store } of opened) await store.close();
  });
  return beats as [Heartbeats, Heartbeats];
}

test('beats taken by one agent reach the other within two rounds; the newer beat wins, and a bot never seen is unknown to both', async (t) => {
  const [one, other] = await twoAgents(t);
  const at = Date.now();
  one.beat('bot_1_1_hb', 5_000, at);
  other.beat('bot_1_1_hb2', null, at);
  t.is(other.latest('bot_1_1_hb'), undefined, 'not before a round');
  t.true(await eventually(() => other.latest('bot_1_1_hb')?.atMs === at && one.latest('bot_1_1_hb2')?.atMs === at, 3 * BEATS_SHARED_EVERY_MS, 50));
  t.deepEqual(other.latest('bot_1_1_hb'), { botId: 'bot_1_1_hb', atMs: at, ttlMs: 5_000 });
  t.is(one.latest('bot_1_1_hb2')?.ttlMs, null, 'a beat that asked for no ttl stays so');
  // A beat the bot sent to the other agent later is newer: both end with it; an older one read late changes nothing.
  other.beat('bot_1_1_hb', 5_000, at + 1_000);
  t.true(await eventually(() => one.latest('bot_1_1_hb')?.atMs === at + 1_000, 3 * BEATS_SHARED_EVERY_MS, 50));
  t.is(other.latest('bot_1_1_hb')?.atMs, at + 1_000);
  t.is(one.latest('bot_1_1_never'), undefined);
  t.is(one.margin, 2 * BEATS_SHARED_EVERY_MS, 'a beat is judged late only once two rounds could have brought it');
});

test('a thousand bots beating at one agent: one round carries them all to the other', async (t) => {
  const [one, other] = await twoAgents(t);
  const at = Date.now();
  for (let i = 0; i < 1_000; i++) one.beat(`bot_1_${i}_many`, 30_000, at);
  t.true(await eventually(() => other.size === 1_000, 3 * BEATS_SHARED_EVERY_MS, 50), `the other holds ${other.size}`);
});
