import test from 'ava';
import type { StoredEvent } from '../../src/history/history-store.js';
import type { AgentStore } from '../../src/history/open-store.js';
import { openStore as openHistory } from '../../src/history/open-store.js';
import type { SharedWindow } from '../../src/shared/shared-state.js';
import { gate } from '../helpers/gate.js';
import { dropDatabases, freshDatabase } from '../helpers/postgres.js';
import { historyBatchSuite } from '../helpers/history-batch-suite.js';
import { storeSuite, waitFor } from '../helpers/store-suite.js';
import { TcpRelay } from '../helpers/tcp-relay.js';
import { eventually } from '../helpers/eventually.js';

// The history in a real PostgreSQL server (Debian's, started by scripts/postgres.sh in npm test): the same
// suite as SQLite's, then what only a store shared by several agents must do (docs/api.md §11).
const urls = new WeakMap<AgentStore, string>();
const windows = new WeakMap<AgentStore, SharedWindow>();
async function openStore(shared?: AgentStore): Promise<AgentStore> {
  const url = shared ? urls.get(shared)! : await freshDatabase();
  const { store, sharedWindow } = openHistory({ databaseUrl: url, dataDir: ':memory:' }, () => undefined);
  urls.set(store, url);
  windows.set(store, sharedWindow!);
  return store;
}

test.after.always(dropDatabases);

storeSuite('PostgreSQL', openStore);
// A run end whose logs hold a NUL, which PostgreSQL's text refuses (22021): an answer, not an outage.
historyBatchSuite('PostgreSQL', openStore, (tx, botId, record, runKey) => tx.addExit(botId, { ...record, logs: 'a\u0000b' }, runKey));

async function pair(t: { teardown(fn: () => Promise<void>): void }): Promise<[AgentStore, AgentStore]> {
  const one = await openStore();
  await one.opened();
  const other = await openStore(one);
  await other.opened();
  t.teardown(async () => {
    await one.close();
    await other.close();
  });
  return [one, other];
}

test('two agents sharing a database: an event kept by one reaches the subscribers of both; a run end both report is kept once', async (t) => {
  const [one, other] = await pair(t);
  const heardByOther: StoredEvent[] = [];
  other.subscribe((event) => heardByOther.push(event));
  const exit = { at: new Date().toISOString(), exit_code: 3, signal: null, oom_killed: false, requested: false, started_at: null, unhealthy: null, logs: 'bye\n' };
  const [first, second] = await Promise.all([one.addExit('bot_1_1_a', exit, 'docker:abc:1'), other.addExit('bot_1_1_a', exit, 'docker:abc:1')]);
  t.is([first, second].filter(Boolean).length, 1, 'one of them kept it');
  t.deepEqual(await other.exits('bot_1_1_a', 50), [exit]);
  const event = await one.appendEvent('bot_1_1_a', 'exited', Date.now(), (id) => JSON.stringify({ id }));
  await waitFor(() => heardByOther.length > 0);
  t.deepEqual(heardByOther, [event]);
});

test('cursors commit in order: an event whose transaction began later waits for the earlier one, so a resume never passes one', async (t) => {
  const [one, other] = await pair(t);
  const held = gate();
  let appended = false;
  let earlierCommitted = false;
  const earlier = one
    .transaction(async (tx) => {
      const event = await tx.appendEvent('bot_1_1_a', 'started', 1, (id) => id);
      appended = true;
      await held.promise;
      return event;
    })
    .then((event) => {
      earlierCommitted = true;
      return event;
    });
  await waitFor(() => appended);
  let laterCommittedFirst = false;
  const later = other.appendEvent('bot_1_1_b', 'started', 2, (id) => id).then((event) => {
    laterCommittedFirst = !earlierCommitted;
    return event;
  });
  // Meanwhile a reader resuming from the start sees nothing: not the later event without the earlier one.
  await new Promise((resolve) => setTimeout(resolve, 500));
  t.deepEqual(await other.eventsAfter(0, undefined, 10), []);
  held.open();
  const [a, b] = await Promise.all([earlier, later]);
  t.false(laterCommittedFirst, 'the later transaction committed before the earlier one');
  t.true(b!.seq > a!.seq);
  t.deepEqual((await other.eventsAfter(0, undefined, 10)).map((event) => event.seq), [a!.seq, b!.seq]);
});

test('two agents claiming deliveries at once take different ones: each delivery is made by one at a time', async (t) => {
  const [one, other] = await pair(t);
  for (let i = 0; i < 20; i += 1) {
    const event = (await one.appendEvent(`bot_1_1_${i}`, 'started', i, () => '{}'))!;
    await one.addDelivery(event, 0);
  }
  const [mine, theirs] = await Promise.all([one.claimDeliveries(10, 20, 60_000), other.claimDeliveries(10, 20, 60_000)]);
  const seqs = [...mine, ...theirs].map((delivery) => delivery.seq);
  t.is(seqs.length, 20, 'every due delivery was claimed');
  t.is(new Set(seqs).size, 20, 'none by both');
});

test('two agents counting lifecycle operations: the limit holds across both, not once per agent', async (t) => {
  const [one, other] = await pair(t);
  const window = (store: AgentStore, nowMs: number) => windows.get(store)!('platform bot_1_1_a', 2, 60_000, nowMs);
  t.is(await window(one, 1_000), undefined);
  t.is(await window(other, 2_000), undefined);
  t.is(await window(one, 3_000), 58_000, 'the third waits until the first leaves the window');
  t.is(await window(other, 3_000), 58_000);
  t.is(await window(other, 61_001), undefined, 'room again once the first has left it');
  const atOnce = await Promise.all([window(one, 200_000), window(other, 200_000), window(one, 200_000)]);
  t.is(atOnce.filter((wait) => wait === undefined).length, 2, 'asked at once, two of three let through');
});

test("a stop's event and a crash loop's end on one agent, a recovery on the other, 200 times at once: one lock order, no deadlock, no event lost", async (t) => {
  const [one, other] = await pair(t);
  const botId = 'bot_1_1_lockorder';
  const event = (type: string) => (id: string) => JSON.stringify({ id, type });
  for (let round = 0; round < 200; round += 1) {
    await one.startCrashLoop(botId, round);
    const outcomes = await Promise.allSettled([
      // A stop (BotHistory.operationEnded): its event, then the end of the crash loop.
      one.transaction(async (tx) => {
        await tx.appendEvent(botId, 'operation', round, event('operation'));
        if (await tx.endCrashLoop(botId)) await tx.appendEvent(botId, 'recovered', round, event('recovered'));
      }),
      // A recovery: the end of the crash loop, then its event.
      other.transaction(async (tx) => {
        if (await tx.endCrashLoop(botId)) await tx.appendEvent(botId, 'recovered', round, event('recovered'));
      }),
    ]);
    const failed = outcomes.find((outcome) => outcome.status === 'rejected');
    if (failed) return t.fail(`round ${round}: ${String((failed as PromiseRejectedResult).reason)}`);
  }
  const events = await one.eventsAfter(0, botId, 1_000);
  t.is(events.filter((kept) => kept.type === 'operation').length, 200);
  t.is(events.filter((kept) => kept.type === 'recovered').length, 200, 'each crash loop ended once, and said so once');
});

test("an agent whose connections die without a word (its database's host gone, an idle time-out on the way) notices, listens again and hears what it missed", async (t) => {
  const url = new URL(await freshDatabase());
  const relay = new TcpRelay({ host: url.hostname, port: Number(url.port) });
  const relayed = new URL(url);
  relayed.port = String(await relay.start());
  const { store: cutOff } = openHistory({ databaseUrl: relayed.toString(), dataDir: ':memory:' }, () => undefined);
  const { store: other } = openHistory({ databaseUrl: url.toString(), dataDir: ':memory:' }, () => undefined);
  t.teardown(async () => {
    await relay.close();
    await Promise.all([cutOff.close(), other.close()]);
  });
  await Promise.all([cutOff.opened(), other.opened()]);
  const heard: StoredEvent[] = [];
  cutOff.subscribe((event) => heard.push(event));
  const append = () => other.appendEvent('bot_1_1_cut', 'operation', Date.now(), (id) => JSON.stringify({ id }));
  // Heard while the connections pass: the feed listens, and has nothing more to read.
  const before = await append();
  t.true(await eventually(() => heard.some((event) => event.seq === before?.seq), 5_000, 20));
  await new Promise((resolve) => setTimeout(resolve, 200));
  relay.cut();
  const kept = await append();
  t.true(await eventually(() => heard.some((event) => event.seq === kept?.seq), 20_000, 50), 'the event reached the agent whose connections were cut');
});
