import test from 'ava';
import { CrashBackOffs } from '../../src/health/crash-backoff.js';
import type { BackOff } from '../../src/history/bot-history.js';
import { eventually } from '../helpers/eventually.js';

// A crash back-off (docs/api.md §13): the bot is stopped at once and started when its wait is over, unless its
// back-off is no longer pending by then (a stop through the agent came, say); one the agent died in is taken up
// from the history by the next.
type Driver = ConstructorParameters<typeof CrashBackOffs>[2];
type History = ConstructorParameters<typeof CrashBackOffs>[1];

/** A runtime that restarts crashes itself (Kubernetes: no engineRestarts). */
const kubeLike: Driver = { findBot: async () => Promise.reject(new Error('not asked')) };

function backOffs(pending: BackOff[], driver: Driver = kubeLike, history: Partial<History> = {}, sweepMs?: number) {
  const calls: string[] = [];
  const lifecycle = {
    stop: async (botId: string) => void calls.push(`stop ${botId}`),
    start: async (botId: string) => void calls.push(`start ${botId}`),
  } as unknown as ConstructorParameters<typeof CrashBackOffs>[0];
  const read: History = { pendingBackOffs: async () => pending, crashedSince: async () => false, unansweredCrashes: async () => [], ...history };
  return { calls, made: new CrashBackOffs(lifecycle, read, driver, () => undefined, undefined, Date.now, sweepMs) };
}

/** Docker: the engine's restarts of each bot, as the driver would set them, in `calls` too. */
function dockerLike(calls: string[], running: (botId: string) => boolean = () => true, held: string[] = [], endedAt?: (botId: string) => Date, startedAt?: (botId: string) => Date): Driver {
  const agentRestarted = new Set(held);
  return {
    engineRestarts: async (botId, on) => {
      calls.push(`engine ${on ? 'on' : 'off'} ${botId}`);
      if (on) agentRestarted.delete(botId);
      else agentRestarted.add(botId);
    },
    agentRestartedBots: async () => [...agentRestarted],
    findBot: async (botId) =>
      ({ id: botId, running: running(botId), endedAt: endedAt?.(botId), startedAt: startedAt?.(botId), healthPolicy: { graceMs: undefined, heartbeatTtlMs: undefined, restart: { maxCrashes: undefined, windowMs: 60_000, backoffFirstMs: 1_000, backoffMaxMs: 1_000 } } }) as Awaited<ReturnType<Driver['findBot']>>,
  };
}

// Waits of a few hundred ms: a hold that finds its wait over already (a busy host, 50 ms late) stops nothing, by design.
test('the bot is stopped at once and started once its wait is over; a newer back-off of the bot replaces the older', async (t) => {
  const first: BackOff = { botId: 'bot_1_1_a', untilMs: Date.now() + 500, seq: 1 };
  const second: BackOff = { botId: 'bot_1_1_a', untilMs: Date.now() + 1_500, seq: 2 };
  const pending = [second];
  const { calls, made } = backOffs(pending);
  t.teardown(() => made.close());
  await made.hold(first);
  await made.hold(second);
  t.deepEqual(calls, ['stop bot_1_1_a', 'stop bot_1_1_a']);
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, first.untilMs + 300 - Date.now())));
  t.deepEqual(calls, ['stop bot_1_1_a', 'stop bot_1_1_a'], 'the older wait started nothing');
  t.true(await eventually(() => calls.length === 3, 4_000, 20));
  t.is(calls[2], 'start bot_1_1_a');
});

test('a back-off that is no longer pending when its wait is over starts nothing', async (t) => {
  const { calls, made } = backOffs([]);
  t.teardown(() => made.close());
  await made.hold({ botId: 'bot_1_1_a', untilMs: Date.now() + 500, seq: 1 });
  await new Promise((resolve) => setTimeout(resolve, 900));
  t.deepEqual(calls, ['stop bot_1_1_a']);
});

test('the back-offs the history holds are taken up at start: one past its wait at once, the others at theirs', async (t) => {
  const pending = [
    { botId: 'bot_1_1_a', untilMs: Date.now() - 1_000, seq: 1 },
    { botId: 'bot_1_1_b', untilMs: Date.now() + 200, seq: 2 },
  ];
  const { calls, made } = backOffs(pending);
  t.teardown(() => made.close());
  await made.resume();
  t.true(await eventually(() => calls.includes('start bot_1_1_a'), 1_000, 10));
  t.false(calls.includes('start bot_1_1_b'));
  t.true(await eventually(() => calls.includes('start bot_1_1_b'), 2_000, 10));
  t.false(calls.some((call) => call.startsWith('stop')), 'a taken-up back-off stops nothing: the bot is stopped already');
});

test('closed, nothing is started', async (t) => {
  const { calls, made } = backOffs([{ botId: 'bot_1_1_a', untilMs: Date.now() + 500, seq: 1 }]);
  await made.hold({ botId: 'bot_1_1_a', untilMs: Date.now() + 500, seq: 1 });
  made.close();
  await new Promise((resolve) => setTimeout(resolve, 900));
  t.deepEqual(calls, ['stop bot_1_1_a']);
});

// Seen in a rehearsal under load: the bot's stop for its back-off took longer than the wait (its run had not yet set
// its SIGTERM trap), the platform's stop queued behind it, and the wait's start queued behind that: started again.
test('an operation asked for the bot ends its back-off at once, also when the wait ends while the history is read', async (t) => {
  const reading: Array<() => void> = [];
  const calls: string[] = [];
  const lifecycle = {
    stop: async (botId: string) => void calls.push(`stop ${botId}`),
    start: async (botId: string) => void calls.push(`start ${botId}`),
  } as unknown as ConstructorParameters<typeof CrashBackOffs>[0];
  const backOff = { botId: 'bot_1_1_a', untilMs: Date.now() + 500, seq: 1 };
  const history = {
    pendingBackOffs: () => new Promise<BackOff[]>((resolve) => reading.push(() => resolve([backOff]))),
    crashedSince: async () => false,
    unansweredCrashes: async () => [],
  };
  const made = new CrashBackOffs(lifecycle, history, kubeLike, () => undefined);
  t.teardown(() => made.close());
  await made.hold(backOff);
  t.true(await eventually(() => reading.length === 1, 3_000, 5), 'the wait ended and reads the history');
  made.asked('bot_1_1_a');
  reading[0]!();
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.deepEqual(calls, ['stop bot_1_1_a']);

  await made.hold({ ...backOff, untilMs: Date.now() + 500, seq: 2 });
  made.asked('bot_1_1_a');
  await new Promise((resolve) => setTimeout(resolve, 900));
  t.is(reading.length, 1, 'a wait ended by an operation reads nothing');
  t.deepEqual(calls, ['stop bot_1_1_a', 'stop bot_1_1_a']);
});

test('a first crash waits nothing: left to the runtime where it restarts crashes, started at once where the agent took them over (Docker)', async (t) => {
  const kube = backOffs([]);
  t.teardown(() => kube.made.close());
  await kube.made.hold({ botId: 'bot_1_1_a', untilMs: Date.now(), seq: undefined });
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.deepEqual(kube.calls, []);

  const calls: string[] = [];
  const docker = backOffs([], dockerLike(calls));
  t.teardown(() => docker.made.close());
  await docker.made.hold({ botId: 'bot_1_1_a', untilMs: Date.now(), seq: undefined });
  t.true(await eventually(() => docker.calls.includes('start bot_1_1_a'), 1_000, 10));
  t.deepEqual(calls, [], 'the driver took the restarts over as the bot crashed: nothing to change');
});

test('Docker: a back-off takes the restarts from the engine before it stops the bot', async (t) => {
  const calls: string[] = [];
  const backOff: BackOff = { botId: 'bot_1_1_a', untilMs: Date.now() + 100, seq: 1 };
  const { calls: lifecycle, made } = backOffs([backOff], dockerLike(calls));
  t.teardown(() => made.close());
  await made.hold(backOff);
  t.deepEqual(calls, ['engine off bot_1_1_a']);
  t.deepEqual(lifecycle, ['stop bot_1_1_a']);
  t.true(await eventually(() => lifecycle.includes('start bot_1_1_a'), 2_000, 10));
});

test('Docker: restarts go back to the engine once the bot runs with no crash in its window, not before, and not while it is stopped', async (t) => {
  const calls: string[] = [];
  let crashed = true;
  const running = new Set(['bot_1_1_a']);
  const { made } = backOffs([], dockerLike(calls, (botId) => running.has(botId), ['bot_1_1_a', 'bot_1_1_b']), { crashedSince: async () => crashed }, 30);
  t.teardown(() => made.close());
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.deepEqual(calls, [], 'a crash within the window: the agent keeps the restarts');
  crashed = false;
  t.true(await eventually(() => calls.includes('engine on bot_1_1_a'), 1_000, 10));
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.deepEqual(calls, ['engine on bot_1_1_a'], 'handed back once; a stopped bot keeps the engine from starting it (a give-up)');
});

// Seen on a busy host: the sweep found the bot running a second after the engine restarted its first crash, whose
// record was not kept yet; given its restarts back, the engine restarted the second crash inside its back-off.
test('Docker: restarts stay with the agent while the run is younger than its window, though no crash is recorded yet', async (t) => {
  const calls: string[] = [];
  let startedAt = new Date();
  const { made } = backOffs([], dockerLike(calls, () => true, ['bot_1_1_a'], undefined, () => startedAt), { crashedSince: async () => false }, 30);
  t.teardown(() => made.close());
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.deepEqual(calls, [], 'a run of 200 ms, its window 60 s: the agent keeps the restarts');
  startedAt = new Date(Date.now() - 61_000);
  t.true(await eventually(() => calls.includes('engine on bot_1_1_a'), 1_000, 10), 'a run older than its window, no crash in it: handed back');
});

test('Docker: at start, a held bot whose last crash nothing answered is started; one with a back-off waits for it', async (t) => {
  const backOff: BackOff = { botId: 'bot_1_1_b', untilMs: Date.now() + 300, seq: 4 };
  const { calls, made } = backOffs([backOff], dockerLike([], () => false, ['bot_1_1_a', 'bot_1_1_b', 'bot_1_1_c']), {
    unansweredCrashes: async (botIds) => botIds.filter((botId) => botId !== 'bot_1_1_c'),
  });
  t.teardown(() => made.close());
  await made.resume();
  t.true(await eventually(() => calls.includes('start bot_1_1_a'), 1_000, 10));
  t.deepEqual(calls, ['start bot_1_1_a']);
  t.true(await eventually(() => calls.includes('start bot_1_1_b'), 2_000, 10));
  t.false(calls.includes('start bot_1_1_c'));
});

// Seen on the real engine: the engine restarted the first crash at once, that run crashed too (the engine's restarts
// were the agent's by then) before the first crash's record was kept, and its start began a run during the second's back-off.
test('Docker: a first crash is started only if no later run has ended since (that run\'s record decides), and never a running bot', async (t) => {
  const crashAtMs = Date.now() - 1_000;
  const ends = new Map([
    ['bot_1_1_a', new Date(crashAtMs - 5)],
    ['bot_1_1_b', new Date(crashAtMs + 400)],
  ]);
  const { calls, made } = backOffs([], dockerLike([], (botId) => botId === 'bot_1_1_c', [], (botId) => ends.get(botId) ?? new Date(0)));
  t.teardown(() => made.close());
  for (const botId of ['bot_1_1_a', 'bot_1_1_b', 'bot_1_1_c']) await made.hold({ botId, untilMs: crashAtMs, seq: undefined, crashAtMs });
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.deepEqual(calls, ['start bot_1_1_a']);
});

// A busy host kept the crash's record after its wait was over: the runtime restarted the bot meanwhile where it does.
test('a back-off whose wait was over when it was kept stops nothing and starts the bot at once (a start of a running bot changes nothing)', async (t) => {
  const backOff: BackOff = { botId: 'bot_1_1_a', untilMs: Date.now() - 100, seq: 3, crashAtMs: Date.now() - 2_100 };
  const kube = backOffs([backOff]);
  t.teardown(() => kube.made.close());
  await kube.made.hold(backOff);
  t.true(await eventually(() => kube.calls.includes('start bot_1_1_a'), 1_000, 10), 'an earlier back-off may have scaled it to nothing');
  t.deepEqual(kube.calls, ['start bot_1_1_a']);

  const engine: string[] = [];
  const docker = backOffs([backOff], dockerLike(engine, () => false, [], () => new Date(backOff.crashAtMs!)));
  t.teardown(() => docker.made.close());
  await docker.made.hold(backOff);
  t.true(await eventually(() => docker.calls.includes('start bot_1_1_a'), 1_000, 10));
  t.deepEqual(docker.calls, ['start bot_1_1_a']);
});

test("Docker: the stopped bots whose crashes the agent restarts are started where a crash nothing answered is their last; one read for them all", async (t) => {
  const asked: string[][] = [];
  const { calls, made } = backOffs([], dockerLike([], () => false, ['bot_1_1_a', 'bot_1_1_b', 'bot_1_1_c']), {
    unansweredCrashes: async (botIds) => {
      asked.push([...botIds]);
      return botIds.filter((botId) => botId !== 'bot_1_1_b');
    },
  }, 30);
  t.teardown(() => made.close());
  t.true(await eventually(() => calls.includes('start bot_1_1_a') && calls.includes('start bot_1_1_c'), 1_000, 10));
  t.false(calls.includes('start bot_1_1_b'), 'its last crash was answered (a stop, a give-up)');
  t.deepEqual(asked[0], ['bot_1_1_a', 'bot_1_1_b', 'bot_1_1_c']);
});

// Seen on a busy host: the wait ended while the bot's stop for it waited its turn, the start came first, and the stop
// then stopped the bot for good.
test('a back-off starts the bot only after its stop has ended, however long the stop took; a newer back-off held meanwhile replaces it', async (t) => {
  const calls: string[] = [];
  let stops = 0;
  const lifecycle = {
    stop: async (botId: string) => {
      stops++;
      await new Promise((resolve) => setTimeout(resolve, stops === 1 ? 300 : 10));
      calls.push(`stop ${botId}`);
    },
    start: async (botId: string) => void calls.push(`start ${botId}`),
  } as unknown as ConstructorParameters<typeof CrashBackOffs>[0];
  const older: BackOff = { botId: 'bot_1_1_a', untilMs: Date.now() + 50, seq: 1 };
  const newer: BackOff = { botId: 'bot_1_1_a', untilMs: Date.now() + 600, seq: 2 };
  const history = { pendingBackOffs: async () => [newer], crashedSince: async () => false, unansweredCrashes: async () => [] };
  const made = new CrashBackOffs(lifecycle, history, kubeLike, () => undefined);
  t.teardown(() => made.close());
  const first = made.hold(older);
  await made.hold(newer);
  await first;
  t.deepEqual(calls, ['stop bot_1_1_a', 'stop bot_1_1_a'], "the older one's wait, over during its stop, started nothing");
  t.true(await eventually(() => calls.includes('start bot_1_1_a'), 2_000, 10));
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.deepEqual(calls, ['stop bot_1_1_a', 'stop bot_1_1_a', 'start bot_1_1_a']);
});

// Seen on the real engine: the engine restarted a second crash before its restarts were taken, the back-off stopped
// that run (which ended after the crash, by the stop), and the start at the wait's end was skipped as for a later run.
test('Docker: a back-off starts the bot though the run its own stop ended ended after the crash', async (t) => {
  const crashAtMs = Date.now() - 500;
  const backOff: BackOff = { botId: 'bot_1_1_a', untilMs: Date.now() + 100, seq: 5, crashAtMs };
  const { calls, made } = backOffs([backOff], dockerLike([], () => false, [], () => new Date(Date.now())));
  t.teardown(() => made.close());
  await made.hold(backOff);
  t.true(await eventually(() => calls.includes('start bot_1_1_a'), 2_000, 10));
  t.deepEqual(calls, ['stop bot_1_1_a', 'start bot_1_1_a']);
});

// Seen on a busy host: a stop asked while the back-off read the runtime, and the back-off's start queued after it.
test('Docker: an operation asked while a first crash\'s back-off reads the runtime ends it: nothing is started', async (t) => {
  const crashAtMs = Date.now() - 1_000;
  let made: CrashBackOffs | undefined;
  const driver: Driver = {
    ...dockerLike([], () => false, [], () => new Date(crashAtMs - 5)),
    findBot: async (botId) => {
      made?.asked(botId);
      return dockerLike([], () => false, [], () => new Date(crashAtMs - 5)).findBot(botId);
    },
  };
  const built = backOffs([], driver);
  made = built.made;
  t.teardown(() => built.made.close());
  await built.made.hold({ botId: 'bot_1_1_a', untilMs: crashAtMs, seq: undefined, crashAtMs });
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.deepEqual(built.calls, []);
});

test('an operation asked while a back-off waits its turn behind an older one ends it', async (t) => {
  let releaseStop = (): void => undefined;
  const calls: string[] = [];
  const lifecycle = {
    stop: async (botId: string) => {
      await new Promise<void>((resolve) => (releaseStop = resolve));
      calls.push(`stop ${botId}`);
    },
    start: async (botId: string) => void calls.push(`start ${botId}`),
  } as unknown as ConstructorParameters<typeof CrashBackOffs>[0];
  const older: BackOff = { botId: 'bot_1_1_a', untilMs: Date.now() + 5_000, seq: 1 };
  const newer: BackOff = { botId: 'bot_1_1_a', untilMs: Date.now() + 300, seq: 2 };
  const history = { pendingBackOffs: async () => [newer], crashedSince: async () => false, unansweredCrashes: async () => [] };
  const made = new CrashBackOffs(lifecycle, history, kubeLike, () => undefined);
  t.teardown(() => made.close());
  void made.hold(older);
  const held = made.hold(newer);
  // A stop through the agent, asked as the newer back-off was kept; the older back-off's stop still under way.
  made.asked('bot_1_1_a');
  for (let turn = 0; turn < 2; turn++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    releaseStop();
  }
  await held;
  await new Promise((resolve) => setTimeout(resolve, 600));
  t.false(calls.includes('start bot_1_1_a'), calls.join(', '));
});
