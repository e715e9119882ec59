import test from 'ava';
import { EXIT_LOG_BYTES } from '../../src/history/history-store.js';
import type { ExitRecord, RevisionRecord, StoredEvent } from '../../src/history/history-store.js';
import type { AgentStore } from '../../src/history/open-store.js';
import type { ScheduleSpec } from '../../src/schedules/schedule-spec.js';
import { ScheduleStore } from '../../src/schedules/schedule-store.js';
import type { StoredRun, StoredSchedule } from '../../src/schedules/schedule-store.js';

/** Opens a store of the backend under test: empty, or with `shared` another store over the same data as one opened before. */
export type OpenStore = (shared?: AgentStore) => Promise<AgentStore>;

const record = (atMs: number, logs = 'x\n'): ExitRecord => ({
  at: new Date(atMs).toISOString(),
  exit_code: 1,
  signal: null,
  oom_killed: false,
  requested: false,
  started_at: null,
  unhealthy: null,
  logs,
});

/** The behaviour every history store has, whichever database holds it: one suite, run against each backend. */
export function storeSuite(backend: string, open: OpenStore): void {
  const opened = async (t: { teardown(fn: () => Promise<void>): void }, shared?: AgentStore): Promise<AgentStore> => {
    const store = await open(shared);
    await store.opened();
    t.teardown(() => store.close());
    return store;
  };

  test(`${backend}: the last 50 records of a bot, whatever their age, one per run; older ones of the last hour still count as crashes`, async (t) => {
    const store = await opened(t);
    const old = Date.now() - 2 * 3_600_000;
    for (let i = 0; i < 60; i += 1) await store.addExit('bot_1_1_a', record(old + i), `run-${i}`);
    t.false(await store.addExit('bot_1_1_a', record(old + 59), 'run-59'), 'a run seen twice is kept once');
    t.is((await store.exits('bot_1_1_a', 100)).length, 50);
    t.is((await store.exits('bot_1_1_a', 1))[0]!.at, new Date(old + 59).toISOString(), 'newest first');
    for (let i = 0; i < 60; i += 1) await store.addExit('bot_1_1_b', record(Date.now() - 60 + i), `recent-${i}`);
    t.is((await store.exits('bot_1_1_b', 100)).length, 50, 'records younger than an hour are not kept past 50');
    t.true((await store.exits('bot_1_1_b', 50)).every((exit) => exit.logs === 'x\n'));
    t.is((await store.crashesSince('bot_1_1_b', Date.now() - 3_600_000)).length, 60, 'the last hour is counted whole');
    await store.addExit('bot_1_1_b', { ...record(Date.now()), requested: true }, 'restarted');
    const table = await store.tableRecords(['bot_1_1_a', 'bot_1_1_b', 'bot_1_1_none'], Date.now() - 3_600_000);
    t.like(table.get('bot_1_1_b'), { ends: 61, crashes: 60, lastExit: { requested: true, logs: '' } }, 'every exit of the last hour counts, requested ones too');
    t.like(table.get('bot_1_1_a'), { ends: 0, crashes: 0, lastExit: { at: new Date(old + 59).toISOString() } }, 'runs ended two hours ago are not of the last hour');
    t.false(table.has('bot_1_1_none'));
  });

  test(`${backend}: the console's table reads each bot's crash loop and give-up with the others', and only the bots asked for`, async (t) => {
    const store = await opened(t);
    await store.startCrashLoop('bot_1_1_looping', Date.now());
    await store.giveUp('bot_1_1_given', Date.now() - 1_000);
    await store.giveUp('bot_1_1_started', Date.now() - 1_000);
    await store.endGiveUp('bot_1_1_started', Date.now());
    await store.addExit('bot_1_1_other', record(Date.now()), 'run');
    const table = await store.tableRecords(['bot_1_1_looping', 'bot_1_1_given', 'bot_1_1_started'], Date.now() - 3_600_000);
    t.deepEqual([...table.keys()].sort(), ['bot_1_1_given', 'bot_1_1_looping', 'bot_1_1_started']);
    t.like(table.get('bot_1_1_looping'), { crashLooping: true, givenUp: undefined, lastExit: null });
    t.like(table.get('bot_1_1_given'), { crashLooping: false, givenUp: { endedMs: undefined } });
    t.true(table.get('bot_1_1_started')?.givenUp?.endedMs !== undefined);
    t.is((await store.tableRecords([], 0)).size, 0);
  });

  test(`${backend}: a console session's end is kept until its expiry, for every agent sharing the store`, async (t) => {
    const store = await opened(t);
    const now = Date.now();
    await store.endSession('nonce-a', now + 60_000, now);
    await store.endSession('nonce-a', now + 60_000, now);
    await store.endSession('nonce-old', now + 1_000, now);
    t.true(await store.sessionEnded('nonce-a'));
    t.false(await store.sessionEnded('nonce-b'));
    await store.endSession('nonce-c', now + 60_000, now + 2_000);
    t.false(await store.sessionEnded('nonce-old'), 'an end past its expiry is dropped');
  });

  test(`${backend}: a record keeps at most 64 KiB of logs as answered in JSON, the newest lines, whatever bytes the bot wrote`, async (t) => {
    const store = await opened(t);
    const control = `${'\x01'.repeat(42_000)}\n`.repeat(100);
    await store.addExit('bot_1_1_a', record(Date.now(), `${control}last words\n`), 'run');
    const [kept] = await store.exits('bot_1_1_a', 1);
    t.true(Buffer.byteLength(JSON.stringify(kept!.logs)) - 2 <= EXIT_LOG_BYTES);
    t.true(kept!.logs.endsWith('last words\n'));
    t.true(Buffer.byteLength(JSON.stringify(await store.exits('bot_1_1_a', 50))) < EXIT_LOG_BYTES + 1024);
  });

  test(`${backend}: forgetting a bot drops its records, events and crash loop, and says since when`, async (t) => {
    const store = await opened(t);
    await store.addExit('bot_1_1_a', record(Date.now(), ''), 'run');
    await store.appendEvent('bot_1_1_a', 'started', Date.now(), () => '{}');
    await store.appendEvent('bot_1_1_b', 'started', Date.now(), () => '{}');
    t.true(await store.startCrashLoop('bot_1_1_a', Date.now()));
    const removedAt = Date.now();
    await store.forget('bot_1_1_a', removedAt);
    t.deepEqual(await store.exits('bot_1_1_a', 50), []);
    t.deepEqual(await store.eventsAfter(0, 'bot_1_1_a', 10), []);
    t.is((await store.eventsAfter(0, undefined, 10)).length, 1, "another bot's events stay");
    t.false(await store.isCrashLooping('bot_1_1_a'));
    t.is(await store.forgottenAt('bot_1_1_a'), removedAt);
    t.is(await store.forgottenAt('bot_1_1_b'), undefined);
  });

  test(`${backend}: revisions: kept once, their outcome changed (a change to the same outcome changes nothing), the newest 20, gone with the bot`, async (t) => {
    const store = await opened(t);
    const at = new Date(Date.now() - 1_000).toISOString();
    const revision = (n: number, outcome: RevisionRecord['outcome'], reason: string | null = null): RevisionRecord => ({
      revision: n,
      spec: { image: `bot:${n}`, env: ['MODE'] },
      by: 'platform',
      at,
      outcome,
      reason,
      ended_at: outcome === 'deploying' ? null : at,
    });
    t.true(await store.putRevision('bot_1_1_a', revision(1, 'succeeded')));
    t.true(await store.putRevision('bot_1_1_a', revision(2, 'deploying')));
    t.true(await store.putRevision('bot_1_1_a', revision(2, 'failed', 'its run exited with code 3')));
    t.false(await store.putRevision('bot_1_1_a', revision(2, 'failed', 'told again')), 'the same outcome twice is kept once');
    t.deepEqual(await store.revisions('bot_1_1_a', 10), [revision(2, 'failed', 'its run exited with code 3'), revision(1, 'succeeded')]);
    await store.putRevision('bot_1_1_b', revision(7, 'deploying'));
    t.deepEqual(await store.deployingRevisions(), [{ botId: 'bot_1_1_b', revision: 7, atMs: Date.parse(at) }], 'those still deploying, of every bot');
    for (let n = 3; n <= 25; n += 1) await store.putRevision('bot_1_1_a', revision(n, 'succeeded'));
    const kept = await store.revisions('bot_1_1_a', 50);
    t.deepEqual(kept.map((r) => r.revision), Array.from({ length: 20 }, (_, i) => 25 - i));
    await store.forget('bot_1_1_a', Date.now());
    t.deepEqual(await store.revisions('bot_1_1_a', 50), []);
  });

  test(`${backend}: a removal written again late (a spool replayed after a crash) leaves what the bot made again since alone`, async (t) => {
    const store = await opened(t);
    await store.addExit('bot_1_1_a', record(1_000, ''), 'old-run');
    await store.forget('bot_1_1_a', 2_000);
    await store.addExit('bot_1_1_a', record(3_000, 'new bot'), 'new-run');
    await store.appendEvent('bot_1_1_a', 'started', 3_000, () => '{}', 'started:new-run');
    t.true(await store.startCrashLoop('bot_1_1_a', 3_000));
    await store.forget('bot_1_1_a', 2_000);
    t.is((await store.exits('bot_1_1_a', 50))[0]?.logs, 'new bot');
    t.is((await store.eventsAfter(0, 'bot_1_1_a', 10)).length, 1);
    t.true(await store.isCrashLooping('bot_1_1_a'));
    t.is(await store.forgottenAt('bot_1_1_a'), 2_000, 'the later removal time stays');
  });

  test(`${backend}: events carry growing cursors, are kept once per key, and reach subscribers once committed, in order; a rolled back one never`, async (t) => {
    const store = await opened(t);
    const heard: StoredEvent[] = [];
    store.subscribe((event) => heard.push(event));
    const first = await store.appendEvent('bot_1_1_a', 'started', 1, (id) => JSON.stringify({ id }), 'started:run-1');
    t.is(await store.appendEvent('bot_1_1_a', 'started', 1, (id) => JSON.stringify({ id }), 'started:run-1'), undefined);
    await t.throwsAsync(
      store.transaction(async (tx) => {
        await tx.appendEvent('bot_1_1_a', 'exited', 2, (id) => JSON.stringify({ id }));
        throw new Error('undone');
      }),
      { message: 'undone' },
    );
    const second = await store.transaction(async (tx) => tx.appendEvent('bot_1_1_b', 'exited', 3, (id) => JSON.stringify({ id })));
    t.true(second!.seq > first!.seq);
    t.is(first!.data, JSON.stringify({ id: String(first!.seq) }), 'the data carries the cursor');
    const kept = await store.eventsAfter(0, undefined, 10);
    t.deepEqual(kept.map((event) => event.type), ['started', 'exited']);
    t.deepEqual(await store.eventsAfter(first!.seq, undefined, 10), [second]);
    t.deepEqual(await store.eventsAfter(0, 'bot_1_1_b', 10), [second]);
    await waitFor(() => heard.length >= 2);
    t.deepEqual(heard.map((event) => event.seq), [first!.seq, second!.seq]);
  });

  test(`${backend}: a crash loop is entered and ended once, however often it is asked`, async (t) => {
    const store = await opened(t);
    t.true(await store.startCrashLoop('bot_1_1_a', 5));
    t.false(await store.startCrashLoop('bot_1_1_a', 6));
    t.deepEqual(await store.crashLoopingBots(), ['bot_1_1_a']);
    t.is(await store.crashLoopingCount(), 1);
    t.true(await store.endCrashLoop('bot_1_1_a'));
    t.false(await store.endCrashLoop('bot_1_1_a'));
    t.is(await store.crashLoopingCount(), 0);
  });

  test(`${backend}: a give-up holds until a start ends it, a later give-up holds again, and it goes with the bot`, async (t) => {
    const store = await opened(t);
    t.is(await store.givenUp('bot_1_1_a'), undefined);
    await store.giveUp('bot_1_1_a', 5);
    t.deepEqual(await store.givenUp('bot_1_1_a'), { sinceMs: 5, endedMs: undefined });
    await store.endGiveUp('bot_1_1_a', 9);
    await store.endGiveUp('bot_1_1_a', 12);
    t.deepEqual(await store.givenUp('bot_1_1_a'), { sinceMs: 5, endedMs: 9 }, 'the first start ended it');
    await store.giveUp('bot_1_1_a', 20);
    t.deepEqual(await store.givenUp('bot_1_1_a'), { sinceMs: 20, endedMs: undefined });
    t.is(await store.givenUp('bot_1_1_b'), undefined);
    await store.forget('bot_1_1_a', 30);
    t.is(await store.givenUp('bot_1_1_a'), undefined);
  });

  test(`${backend}: the events of a type still their bot's latest among others: a crash back-off no stop, start or give-up has come after`, async (t) => {
    const store = await opened(t);
    const among = ['backing-off', 'operation', 'given-up'];
    const a = (await store.appendEvent('bot_1_1_a', 'backing-off', 100, () => '{"n":1}'))!;
    await store.appendEvent('bot_1_1_a', 'started', 101, () => '{}');
    const b = (await store.appendEvent('bot_1_1_b', 'backing-off', 102, () => '{"n":2}'))!;
    await store.appendEvent('bot_1_1_b', 'operation', 103, () => '{}');
    const c1 = (await store.appendEvent('bot_1_1_c', 'backing-off', 104, () => '{"n":3}'))!;
    const c2 = (await store.appendEvent('bot_1_1_c', 'backing-off', 105, () => '{"n":4}'))!;
    await store.appendEvent('bot_1_1_d', 'backing-off', 10, () => '{"n":5}');
    t.truthy(c1);
    t.deepEqual(await store.latestOfType('backing-off', among, 50), [a, c2], 'b was stopped since; c backs off again; d is older than asked');
    t.deepEqual(await store.latestOfType('backing-off', among, 50, ['bot_1_1_c', 'bot_1_1_b', 'bot_1_1_z']), [c2], 'of the bots asked alone');
    t.deepEqual(await store.latestOfType('backing-off', among, 50, []), [], 'no bot asked, none answered');
    t.truthy(b);
  });

  test(`${backend}: nodes renew their rows and replace their bots; a bot named by another node moves there`, async (t) => {
    const store = await opened(t);
    t.deepEqual(await store.nodes(), []);
    await store.renewNode('node-b', null, 100, null);
    await store.renewNode('node-a', 'http://10.0.0.1:8000', 100, 'seal-1');
    await store.putNodeBots('node-a', [{ botId: 'bot_1_1_a', running: true }, { botId: 'bot_1_1_b', running: false }], 100);
    await store.putNodeBots('node-b', [{ botId: 'bot_1_1_c', running: true }], 100);
    await store.renewNode('node-a', 'http://10.0.0.1:8000', 200, 'seal-2');
    t.deepEqual(await store.nodes(), [
      { name: 'node-a', url: 'http://10.0.0.1:8000', aliveMs: 200, seal: 'seal-2', bots: 2, running: 1 },
      { name: 'node-b', url: null, aliveMs: 100, seal: null, bots: 1, running: 1 },
    ]);
    // node-a's bot_1_1_b is gone, bot_1_1_a now runs on node-b.
    await store.putNodeBots('node-a', [], 300);
    await store.putNodeBots('node-b', [{ botId: 'bot_1_1_c', running: false }, { botId: 'bot_1_1_a', running: true }], 300);
    t.deepEqual((await store.nodes()).map((node) => [node.name, node.bots, node.running]), [
      ['node-a', 0, 0],
      ['node-b', 2, 1],
    ]);
    t.deepEqual(await store.nodeOfBot('bot_1_1_a'), { name: 'node-b', url: null, aliveMs: 100, seal: null });
    t.is(await store.nodeOfBot('bot_1_1_b'), undefined);
    t.deepEqual(await store.botsOfNode('node-b'), [{ botId: 'bot_1_1_a', running: true }, { botId: 'bot_1_1_c', running: false }]);
    t.deepEqual(await store.botsOfNode('node-a'), []);
  });

  test(`${backend}: a placement changes only from the one read, names the bot's node before its engine's word, and goes with the bot's removal`, async (t) => {
    const store = await opened(t);
    await store.renewNode('node-a', null, 100, null);
    await store.renewNode('node-c', null, 100, null);
    await store.putNodeBots('node-a', [{ botId: 'bot_1_1_a', running: false }], 100);
    await store.putNodeBots('node-c', [{ botId: 'bot_1_1_b', running: false }], 100);
    t.deepEqual(await store.placementsOf(['bot_1_1_a', 'bot_1_1_b']), [], 'no move took either');
    const here = await store.place('bot_1_1_a', undefined, 'node-a', false, 200);
    t.deepEqual(here, { botId: 'bot_1_1_a', node: 'node-a', generation: 1, startPending: false });
    t.is(await store.place('bot_1_1_a', undefined, 'node-c', false, 200), undefined, 'a second first placement loses');
    const there = await store.place('bot_1_1_a', here, 'node-c', true, 300);
    t.deepEqual(there, { botId: 'bot_1_1_a', node: 'node-c', generation: 2, startPending: true });
    t.is(await store.place('bot_1_1_a', here, 'node-a', false, 300), undefined, 'a write from the placement before changes nothing');
    // node-a still lists its leftover copy, written after: the placement names node-c all the same.
    await store.putNodeBots('node-a', [{ botId: 'bot_1_1_a', running: false }], 400);
    t.is((await store.nodeOfBot('bot_1_1_a'))?.name, 'node-c');
    t.is((await store.nodeOfBot('bot_1_1_b'))?.name, 'node-c', 'a bot never moved is its engine\'s node\'s');
    await store.placementStarted('bot_1_1_a', 1);
    t.true((await store.placementsOf(['bot_1_1_a']))[0]?.startPending, 'a start of an older placement is not this one\'s');
    await store.placementStarted('bot_1_1_a', 2);
    t.deepEqual(await store.placementsOf(['bot_1_1_z', 'bot_1_1_a']), [{ botId: 'bot_1_1_a', node: 'node-c', generation: 2, startPending: false }]);
    await store.transaction((tx) => tx.forget('bot_1_1_a', 500));
    t.deepEqual(await store.placementsOf(['bot_1_1_a']), [], 'removed with the bot');
    t.is((await store.nodeOfBot('bot_1_1_a'))?.name, 'node-a');
  });

  test(`${backend}: when a bot's latest event of some types happened; undefined when it has none`, async (t) => {
    const store = await opened(t);
    await store.appendEvent('bot_1_1_a', 'operation', 300, () => '{}');
    await store.appendEvent('bot_1_1_a', 'given-up', 200, () => '{}');
    await store.appendEvent('bot_1_1_a', 'started', 900, () => '{}');
    await store.appendEvent('bot_1_1_b', 'operation', 800, () => '{}');
    t.is(await store.lastEventAt('bot_1_1_a', ['operation', 'given-up']), 300);
    t.is(await store.transaction((tx) => tx.lastEventAt('bot_1_1_a', ['given-up'])), 200);
    t.is(await store.lastEventAt('bot_1_1_a', ['deploy-started']), undefined);
    t.is(await store.lastEventAt('bot_1_1_c', ['operation']), undefined);
  });

  test(`${backend}: a bot's own chats are kept, replaced, dropped, and go with a removal after they were set, not before`, async (t) => {
    const store = await opened(t);
    t.is(await store.botChats('bot_1_1_a'), undefined);
    await store.setBotChats('bot_1_1_a', '{"discord_url":"https://discord.com/api/webhooks/1/a"}', 10);
    await store.setBotChats('bot_1_1_a', '{"slack_url":"https://hooks.slack.com/services/T/B/c"}', 11);
    t.is(await store.botChats('bot_1_1_a'), '{"slack_url":"https://hooks.slack.com/services/T/B/c"}');
    t.is(await store.botChats('bot_1_1_b'), undefined);
    await store.setBotChats('bot_1_1_a', undefined, 12);
    t.is(await store.botChats('bot_1_1_a'), undefined);
    await store.setBotChats('bot_1_1_a', '{"ntfy":{"url":"https://ntfy.sh/x"}}', 20);
    await store.forget('bot_1_1_a', 15);
    t.truthy(await store.botChats('bot_1_1_a'), 'a removal written late leaves the chats set since alone');
    await store.forget('bot_1_1_a', 25);
    t.is(await store.botChats('bot_1_1_a'), undefined);
  });

  test(`${backend}: deliveries are claimed oldest first per bot, one claimant at a time, again once the claim lapses or fails`, async (t) => {
    const store = await opened(t);
    const a1 = (await store.appendEvent('bot_1_1_a', 'started', 1, () => '{"n":1}'))!;
    const a2 = (await store.appendEvent('bot_1_1_a', 'exited', 2, () => '{"n":2}'))!;
    const b1 = (await store.appendEvent('bot_1_1_b', 'started', 3, () => '{"n":3}'))!;
    for (const event of [a1, a2, b1]) await store.addDelivery(event, 1_000);
    t.deepEqual((await store.claimDeliveries(1_000, 10, 500)).map((d) => d.seq).sort(), [a1.seq, b1.seq].sort(), "each bot's oldest");
    t.deepEqual(await store.claimDeliveries(1_200, 10, 500), [], 'claimed already');
    t.is(await store.nextDeliveryAt(), 1_500, 'when the claims lapse');
    await store.deliveryDone(a1.seq);
    await store.deliveryFailed(b1.seq, 1, 5_000);
    t.deepEqual((await store.claimDeliveries(1_300, 10, 500)).map((d) => d.seq), [a2.seq], "the bot's next, in order");
    t.deepEqual(await store.claimDeliveries(1_300, 10, 500), []);
    t.deepEqual((await store.claimDeliveries(1_900, 10, 500)).map((d) => d.seq), [a2.seq], 'a lapsed claim is taken again');
    await store.deliveryDone(a2.seq);
    const again = await store.claimDeliveries(5_000, 10, 500);
    t.deepEqual(again.map((d) => [d.seq, d.attempts]), [[b1.seq, 1]], 'the failed one once due');
  });

  test(`${backend}: a schedule's due time claimed by two agents over the same data at once is theirs once; a going run refuses another; a lapsed lease is cut once; a removal takes them`, async (t) => {
    const first = await opened(t);
    // Where the backend opens a second store over the same data (PostgreSQL), the two agents each have one; one agent's store otherwise.
    const second = backend === 'SQLite' ? first : await opened(t, first);
    const [a, b] = [new ScheduleStore(first.sql()), new ScheduleStore(second.sql())];
    const botId = 'bot_1_1_sched';
    const spec: ScheduleSpec = { name: null, cron: '* * * * *', time_zone: 'UTC', enabled: true, only_when_running: false, missed: 'skip', starting_deadline_s: 60, actions: [{ type: 'restart', offset_s: 0, continue_on_failure: false }] };
    const made = await a.create('sch_00000000000000aa', botId, spec, 0);
    const run = (agent: string, dueMs: number): StoredRun => ({ scheduleId: made.id, dueMs, botId, state: 'running', agent, leaseUntilMs: dueMs + 15_000, startedMs: dueMs, endedMs: null, actions: [], reason: null });
    const [readA, readB] = await Promise.all([a.get(botId, made.id), b.get(botId, made.id)]);
    const won = await Promise.all([a.claim(readA!, 60_000, [run('a', 60_000)]), b.claim(readB!, 60_000, [run('b', 60_000)])]);
    t.is(won.filter(Boolean).length, 1, 'one claim of the due time wins');
    const holder = won[0] ? 'a' : 'b';
    t.deepEqual((await b.runs(made.id, 10)).map((one) => [one.dueMs, one.agent]), [[60_000, holder]]);
    t.false(await a.claim(readA!, 60_000, [run('a', 60_000)]), 'a claim from what was read before is refused');
    t.false(await b.addRun(run('b', 61_001), 61_000), 'run now while the run goes');
    t.true(await (holder === 'a' ? a : b).progress(run(holder, 60_000), holder, [], 80_000), 'its holder renews its lease');
    const cut = await Promise.all([a.cutLapsed(90_000, 'lapsed'), b.cutLapsed(90_000, 'lapsed')]);
    t.is(cut.flat().length, 1, 'a lapsed run is cut by one of them');
    t.false(await a.progress(run(holder, 60_000), holder, [], 120_000), 'its holder, back, finds it cut: the chain stops');
    t.true(await a.addRun(run('a', 91_001), 91_000), 'run now once none goes');
    await second.forget(botId, 100_000);
    t.deepEqual(await a.ofBot(botId), []);
    t.deepEqual(await a.runs(made.id, 10), []);
  });

  test(`${backend}: two agents claiming overlapping sets of due schedules in one transaction each take every due time once between them, neither waiting on the other for ever`, async (t) => {
    const first = await opened(t);
    const second = backend === 'SQLite' ? first : await opened(t, first);
    const [a, b] = [new ScheduleStore(first.sql()), new ScheduleStore(second.sql())];
    const spec: ScheduleSpec = { name: null, cron: '* * * * *', time_zone: 'UTC', enabled: true, only_when_running: false, missed: 'skip', starting_deadline_s: 60, actions: [{ type: 'restart', offset_s: 0, continue_on_failure: false }] };
    const made: StoredSchedule[] = [];
    for (let i = 0; i < 60; i += 1) made.push(await a.create(`sch_${i.toString(16).padStart(16, '0')}`, `bot_1_${i}_batch`, spec, 0));
    const claimOf = (agent: string) => (from: StoredSchedule) => ({
      from,
      throughMs: 60_000,
      runs: [{ scheduleId: from.id, dueMs: 60_000, botId: from.botId, state: 'running' as const, agent, leaseUntilMs: 75_000, startedMs: 60_000, endedMs: null, actions: [], reason: null }],
    });
    // a: the first 40 from the last down; b: the last 40 from the first up. 20 in both, asked in opposite orders.
    const [wonA, wonB] = await Promise.all([a.claimAll(made.slice(0, 40).reverse().map(claimOf('a'))), b.claimAll(made.slice(20).map(claimOf('b')))]);
    t.is(wonA.size + wonB.size, 60, 'every schedule claimed');
    t.deepEqual([...wonA].filter((id) => wonB.has(id)), [], 'none by both');
    for (const schedule of made) {
      const runs = await a.runs(schedule.id, 10);
      t.deepEqual(runs.map((run) => [run.dueMs, run.agent]), [[60_000, wonA.has(schedule.id) ? 'a' : 'b']], `${schedule.id}: one run, its claimant's`);
    }
    t.deepEqual((await b.claimAll(made.map(claimOf('b')))).size, 0, 'a claim from what was read before is refused');
  });
}

/** Waits (up to 5 s) until `check` holds. */
export async function waitFor(check: () => boolean): Promise<void> {
  for (let waited = 0; waited < 5_000 && !check(); waited += 10) await new Promise((resolve) => setTimeout(resolve, 10));
}
