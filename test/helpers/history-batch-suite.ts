import test from 'ava';
import { BotHistory } from '../../src/history/bot-history.js';
import type { ExitRecord, HistoryTx, OpenTx } from '../../src/history/history-store.js';
import type { AgentStore } from '../../src/history/open-store.js';
import type { BotInfo, RunEnd } from '../../src/runtime/driver.js';
import { SharedState } from '../../src/shared/shared-state.js';
import type { OpenStore } from './store-suite.js';

/** How the backend under test refuses a run end for good (not an outage): a statement it answers with an error. */
export type RefuseExit = (tx: HistoryTx, botId: string, record: ExitRecord, runKey: string) => Promise<boolean>;

const REFUSED = 'bot_1_9_refused';
const info = (id: string) => ({ id, ownerId: 'user_1', running: true, startedAt: undefined, health: 'none', healthPolicy: { graceMs: undefined, heartbeatTtlMs: undefined } }) as unknown as BotInfo;
const crash = (botId: string, n: number): RunEnd => ({
  botId,
  key: `${botId}:${n}`,
  at: new Date(1_000_000 + n * 1_000 + 500),
  exitCode: 1,
  oomKilled: false,
  requested: false,
  startedAt: new Date(1_000_000 + n * 1_000),
  logs: `crash ${n}\n`,
});

/** `store`, its transactions counted, and the run ends of REFUSED refused as `refuse` does. */
function counted(store: AgentStore, refuse: RefuseExit): { store: AgentStore; transactions: () => number } {
  let transactions = 0;
  const wrapped = new Proxy(store, {
    get(target, property) {
      if (property === 'transaction') {
        return <T>(work: (tx: OpenTx) => Promise<T>) => {
          transactions += 1;
          return target.transaction((tx) => work({ ...tx, addExit: (botId, record, runKey) => (botId === REFUSED ? refuse(tx, botId, record, runKey) : tx.addExit(botId, record, runKey)) }));
        };
      }
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { store: wrapped, transactions: () => transactions };
}

/** How the history keeps many writes asked for at once (docs/performance.md), run against each backend. */
export function historyBatchSuite(backend: string, open: OpenStore, refuse: RefuseExit): void {
  test(`${backend}: writes asked for at once are kept in a few transactions and in order; one the store refuses is reported, the others kept`, async (t) => {
    const opened = await open();
    await opened.opened();
    const { store, transactions } = counted(opened, refuse);
    const reports: string[] = [];
    const history = new BotHistory(store, new SharedState(store), async (id) => info(id), { report: (what) => reports.push(what) });
    t.teardown(async () => {
      await history.close();
      await opened.close();
    });
    const bots = Array.from({ length: 50 }, (_, i) => `bot_1_${i}_batch`);
    const writes: Array<Promise<void>> = [];
    for (const n of [0, 1]) {
      for (const botId of bots) writes.push(history.ended(crash(botId, n)), history.started({ botId, key: `${botId}:${n + 1}`, startedAt: crash(botId, n).at }));
      if (n === 0) writes.push(history.ended(crash(REFUSED, n)));
    }
    await Promise.all(writes);

    const events = await store.eventsAfter(0, undefined, 1_000);
    t.is(events.length, bots.length * 4, 'every end and start of the other bots is kept');
    t.true(transactions() <= 5, `201 writes in ${transactions()} transactions: batches of 100, one tried again write by write`);
    t.deepEqual(reports, ['the history could not keep a run end']);
    t.deepEqual(await store.exits(REFUSED, 10), []);
    t.deepEqual(
      events.filter((event) => event.botId === bots[7]).map((event) => event.type),
      ['exited', 'started', 'exited', 'started'],
      "a bot's events are kept in the order its runs came",
    );
    const seqs = events.map((event) => event.seq);
    t.deepEqual(seqs, [...seqs].sort((a, b) => a - b));

    // The store goes on: a refused write left no transaction or connection behind it.
    await history.ended(crash(bots[0]!, 5));
    t.is((await store.exits(bots[0]!, 10)).length, 3);
  });

  test(`${backend}: a write that fails before its batch's transaction (a session's end refused) is lost alone; the batch's others are kept`, async (t) => {
    const opened = await open();
    await opened.opened();
    const reports: string[] = [];
    // The store refuses one session's end for good (not an outage): a statement it answers with an error.
    const refusing = new Proxy(opened, {
      get(target, property) {
        if (property === 'endSession') {
          return (nonce: string, untilMs: number, nowMs: number) => (nonce === 'refused-nonce' ? Promise.reject(new Error('refused for good')) : target.endSession(nonce, untilMs, nowMs));
        }
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    const history = new BotHistory(refusing, new SharedState(refusing), async (id) => info(id), { report: (what) => reports.push(what) });
    t.teardown(async () => {
      await history.close();
      await opened.close();
    });
    const bots = Array.from({ length: 10 }, (_, i) => `bot_1_${i}_beside`);
    const until = Date.now() + 3_600_000;
    await Promise.all([
      ...bots.map((botId) => history.ended(crash(botId, 0))),
      history.endSession('refused-nonce', until),
      history.endSession('kept-nonce', until),
      ...bots.map((botId) => history.started({ botId, key: `${botId}:1`, startedAt: crash(botId, 0).at })),
    ]);
    t.is((await opened.eventsAfter(0, undefined, 1_000)).length, bots.length * 2, 'every end and start beside it is kept');
    t.true(await opened.sessionEnded('kept-nonce'), 'the other session end is kept');
    t.false(await opened.sessionEnded('refused-nonce'));
    t.deepEqual(reports, ["the history could not keep a console session's end"]);
  });
}
