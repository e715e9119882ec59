import test from 'ava';
import { CrashBackOffs } from '../../src/health/crash-backoff.js';
import type { BackOff } from '../../src/history/bot-history.js';
import { eventually } from '../helpers/eventually.js';

// A crash back-off (docs/api.md §13): the bot is stopped at once and started when its wait is over, unless its
// back-off is no longer pending by then (a stop through the agent came, say); one the agent died in is taken up
// from the history by the next.
function backOffs(pending: BackOff[]) {
  const calls: string[] = [];
  const lifecycle = {
    stop: async (botId: string) => void calls.push(`stop ${botId}`),
    start: async (botId: string) => void calls.push(`start ${botId}`),
  } as unknown as ConstructorParameters<typeof CrashBackOffs>[0];
  const history = { pendingBackOffs: async () => pending };
  return { calls, made: new CrashBackOffs(lifecycle, history, () => undefined) };
}

test('the bot is stopped at once and started once its wait is over; a newer back-off of the bot replaces the older', async (t) => {
  const first: BackOff = { botId: 'bot_1_1_a', untilMs: Date.now() + 100, seq: 1 };
  const second: BackOff = { botId: 'bot_1_1_a', untilMs: Date.now() + 300, seq: 2 };
  const pending = [second];
  const { calls, made } = backOffs(pending);
  t.teardown(() => made.close());
  await made.hold(first);
  await made.hold(second);
  t.deepEqual(calls, ['stop bot_1_1_a', 'stop bot_1_1_a']);
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.deepEqual(calls, ['stop bot_1_1_a', 'stop bot_1_1_a'], 'the older wait started nothing');
  t.true(await eventually(() => calls.length === 3, 2_000, 20));
  t.is(calls[2], 'start bot_1_1_a');
});

test('a back-off that is no longer pending when its wait is over starts nothing', async (t) => {
  const { calls, made } = backOffs([]);
  t.teardown(() => made.close());
  await made.hold({ botId: 'bot_1_1_a', untilMs: Date.now() + 50, seq: 1 });
  await new Promise((resolve) => setTimeout(resolve, 300));
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
  const { calls, made } = backOffs([{ botId: 'bot_1_1_a', untilMs: Date.now() + 50, seq: 1 }]);
  await made.hold({ botId: 'bot_1_1_a', untilMs: Date.now() + 50, seq: 1 });
  made.close();
  await new Promise((resolve) => setTimeout(resolve, 200));
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
  const backOff = { botId: 'bot_1_1_a', untilMs: Date.now() + 50, seq: 1 };
  const history = { pendingBackOffs: () => new Promise<BackOff[]>((resolve) => reading.push(() => resolve([backOff]))) };
  const made = new CrashBackOffs(lifecycle, history, () => undefined);
  t.teardown(() => made.close());
  await made.hold(backOff);
  t.true(await eventually(() => reading.length === 1, 1_000, 5), 'the wait ended and reads the history');
  made.asked('bot_1_1_a');
  reading[0]!();
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.deepEqual(calls, ['stop bot_1_1_a']);

  await made.hold({ ...backOff, untilMs: Date.now() + 100, seq: 2 });
  made.asked('bot_1_1_a');
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.is(reading.length, 1, 'a wait ended by an operation reads nothing');
  t.deepEqual(calls, ['stop bot_1_1_a', 'stop bot_1_1_a']);
});
