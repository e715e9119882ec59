import test from 'ava';
import type { RunEnd } from '../../src/runtime/driver.js';
import type { EngineEvent } from '../../src/runtime/docker/docker-bot-index.js';
import { DockerRunWatcher } from '../../src/runtime/docker/docker-runs.js';
import { eventually } from '../helpers/eventually.js';

// How the engine's events become run ends (docs/api.md §8): which ends were asked for, and which crashes the
// driver hears of at once (docs/api.md §13).
function watcher() {
  const ends: RunEnd[] = [];
  const crashes: string[] = [];
  const runs = new DockerRunWatcher(
    { started: async () => undefined, ended: async (run) => void ends.push(run), lastEnd: async () => undefined },
    async () => '',
    async () => undefined,
    () => undefined,
    (botId) => crashes.push(botId),
  );
  const labels = { 'bot-agent/bot-id': 'bot_1_1_a', name: 'bot_1_1_a', 'bot-agent/restart-backoff-s': '5' };
  const event = (action: string, extra: Record<string, string> = {}, atMs = Date.now()): EngineEvent =>
    ({ Type: 'container', Action: action, Actor: { ID: 'c1', Attributes: { ...labels, ...extra } }, timeNano: atMs * 1e6 }) as EngineEvent;
  return { runs, ends, crashes, event };
}

test("a run that ends by itself is a crash the driver hears of at once, with the policy its labels carry; a kill's end is asked for", async (t) => {
  const { runs, ends, crashes, event } = watcher();
  runs.onEvent(event('start'));
  runs.onEvent(event('die', { exitCode: '3' }));
  t.deepEqual(crashes, ['bot_1_1_a'], 'heard of before its record');
  runs.onEvent(event('start'));
  runs.onEvent(event('kill'));
  runs.onEvent(event('die', { exitCode: '0' }));
  t.true(await eventually(() => ends.length === 2, 1_000, 5));
  t.deepEqual(ends.map((end) => end.requested), [false, true]);
  t.like(ends[0]?.restartPolicy, { backoffFirstMs: 5_000, crashBackOff: false });
  t.deepEqual(crashes, ['bot_1_1_a']);
});

// A stop that finds the container between two runs of its restart policy sends no kill, and the run the engine was
// just beginning may end by itself: not a crash after the stop (seen as a crash loop begun again after a stop).
test("a run that ends while the agent's stop is under way, or a moment after, was asked to; one later is a crash", async (t) => {
  const { runs, ends, crashes, event } = watcher();
  const stopped = runs.stopping('c1');
  runs.onEvent(event('start'));
  runs.onEvent(event('die', { exitCode: '2' }));
  stopped();
  // The engine's clock, as the events carry it: half a second after the stop ended, then two seconds.
  const endedMs = Date.now();
  runs.onEvent(event('start', {}, endedMs + 100));
  runs.onEvent(event('die', { exitCode: '2' }, endedMs + 500));
  t.deepEqual(crashes, [], 'within a second of the stop');
  runs.onEvent(event('start', {}, endedMs + 1_800));
  runs.onEvent(event('die', { exitCode: '2' }, endedMs + 2_000));
  t.true(await eventually(() => ends.length === 3, 1_000, 5));
  t.deepEqual(ends.map((end) => end.requested), [true, true, false]);
  t.deepEqual(crashes, ['bot_1_1_a']);
});
