import test from 'ava';
import { Deploys } from '../../src/deploys/deploys.js';
import type { BotHistory } from '../../src/history/bot-history.js';
import { LocalDeployMarks } from '../../src/lifecycle/deploy-marks.js';
import type { CandidateState, RevisionRuntime, RevisionSpec } from '../../src/provisioning/revisions.js';
import { eventually } from '../helpers/eventually.js';

// The deploy's hold on a bot (docs/api.md §15) ends when the bot is one run again, not once its outcome is
// written: a platform that reads the outcome and deploys again at once (as a benchmark does) is not refused.
const SPEC: RevisionSpec = { image: 'bot:1', command: null, env: [], memory_limit: null, cpu_limit: null, health: null };

/** A runtime at revision 1 whose new run is up, with what a test says in place of any of its calls. */
const runtimeWith = (calls: Partial<RevisionRuntime> = {}): RevisionRuntime => ({
  current: async () => ({ revision: 1, spec: SPEC }),
  previous: async () => undefined,
  switchTo: async () => SPEC,
  candidate: async (): Promise<CandidateState> => ({ exists: true, running: true, startedAtMs: Date.now(), restarts: 0, health: 'none', exitCode: null }),
  lastLines: async () => '',
  keep: async () => undefined,
  undo: async () => undefined,
  rollBack: async () => ({ from: 2, to: 1 }),
  leftDeploys: async () => [],
  settle: async () => undefined,
  ...calls,
});

/** A history that keeps nothing, with what a test says in place of any of its calls. */
const historyWith = (calls: Record<string, unknown>): BotHistory =>
  ({ revisions: async () => [], revision: async () => undefined, note: async () => undefined, exits: async () => [], deployingRevisions: async () => [], ...calls }) as unknown as BotHistory;

const deploysOver = (runtime: RevisionRuntime, history: BotHistory, marks = new LocalDeployMarks()) =>
  new Deploys(runtime, history, marks, async () => undefined, () => undefined, undefined, { watchEveryMs: 10 });

test('a deploy releases the bot once its run is kept, while the outcome is still being written', async (t) => {
  const steps: string[] = [];
  const runtime = runtimeWith({
    candidate: async () => ({ exists: true, running: true, startedAtMs: Date.now() - 5_000, restarts: 0, health: 'none', exitCode: null }),
    keep: async () => void steps.push('kept'),
    undo: async () => void steps.push('undone'),
  });
  let writeOutcome: () => void = () => undefined;
  const history = historyWith({
    revision: (_botId: string, record: { outcome: string }) =>
      record.outcome === 'deploying' ? Promise.resolve() : new Promise<void>((resolve) => (writeOutcome = () => resolve())),
  });
  const marks = new LocalDeployMarks();
  const deploys = deploysOver(runtime, history, marks);
  t.teardown(async () => {
    writeOutcome();
    await deploys.close();
  });
  t.is(await deploys.deploy('bot_1_1_a', { change: {}, minReadyS: 0, deadlineS: 60, rollback: true }, 'platform'), 2);
  t.true(await eventually(() => steps.includes('kept'), 2_000));
  await new Promise((resolve) => setTimeout(resolve, 20));
  t.false(marks.isHeld('bot_1_1_a'), 'still held while its outcome waits to be written');
});

// The engine restarted the failed run before the deploy looked: its exit code is in the run's exit record, which a
// busy host keeps seconds later (it waits for the run's last lines). The verdict waits for it, not 2 s only.
test("a run the engine restarted before the deploy looked is judged by its exit record, however late that is kept", async (t) => {
  const startedAtMs = Date.now();
  const recordedAtMs = startedAtMs + 3_000;
  const runtime = runtimeWith({
    previous: async () => 1,
    candidate: async () =>
      Date.now() < startedAtMs + 100
        ? { exists: true, running: true, startedAtMs, restarts: 0, health: 'none', exitCode: null }
        : { exists: true, running: true, startedAtMs: startedAtMs + 100, restarts: 1, health: 'none', exitCode: null },
  });
  const outcomes: { outcome: string; reason: string | null }[] = [];
  const history = historyWith({
    revision: async (_botId: string, record: { outcome: string; reason: string | null }) => void outcomes.push(record),
    exits: async () => (Date.now() >= recordedAtMs ? [{ started_at: new Date(startedAtMs).toISOString(), exit_code: 4 }] : []),
  });
  const deploys = deploysOver(runtime, history);
  t.teardown(() => deploys.close());
  await deploys.deploy('bot_1_1_a', { change: {}, minReadyS: 5, deadlineS: 60, rollback: true }, 'platform');
  t.true(await eventually(() => outcomes.some((record) => record.outcome === 'failed'), 15_000, 50));
  t.like(outcomes.find((record) => record.outcome === 'failed'), { reason: 'its run exited with code 4' });
});

/** A runtime whose one run is as `run` says, and a history that keeps what is written. */
function firstRunRig(run: () => CandidateState, exits: () => { started_at: string; exit_code: number | null; requested: boolean }[] = () => []) {
  const runtime = runtimeWith({ candidate: async () => run(), lastLines: async () => 'boom\n' });
  const written: { revision: number; outcome: string; reason: string | null; event?: string }[] = [];
  const history = historyWith({
    revision: async (_botId: string, record: { revision: number; outcome: string; reason: string | null }, event?: { type: string }) =>
      void written.push({ revision: record.revision, outcome: record.outcome, reason: record.reason, ...(event ? { event: event.type } : {}) }),
    exits: async () => exits(),
  });
  const deploys = deploysOver(runtime, history);
  const outcome = async (revision: number) => {
    await eventually(() => written.some((w) => w.revision === revision && w.outcome !== 'deploying'), 5_000, 10);
    return written.filter((w) => w.revision === revision).at(-1);
  };
  return { deploys, written, outcome };
}

// Revision 1 is judged as a deploy's run is (docs/api.md §15): a bot that never stayed up does not say it succeeded.
test('a new bot whose first run ends by itself has revision 1 failed, with a deploy-failed event', async (t) => {
  const startedAtMs = Date.now();
  const rig = firstRunRig(
    () => ({ exists: true, running: Date.now() < startedAtMs + 50, startedAtMs, restarts: 0, health: 'none', exitCode: Date.now() < startedAtMs + 50 ? null : 3 }),
    () => (Date.now() >= startedAtMs + 50 ? [{ started_at: new Date(startedAtMs).toISOString(), exit_code: 3, requested: false }] : []),
  );
  t.teardown(() => rig.deploys.close());
  await rig.deploys.created('bot_1_1_a', 'platform');
  t.like(rig.written[0], { revision: 1, outcome: 'deploying' });
  t.deepEqual(await rig.outcome(1), { revision: 1, outcome: 'failed', reason: 'its run exited with code 3', event: 'deploy-failed' });
});

test('a new bot whose first run stays up has revision 1 succeeded; one not yet started is waited for', async (t) => {
  const createdAtMs = Date.now();
  // Not started for its first 100 ms (a pod whose image is pulled), then up since long enough.
  const rig = firstRunRig(() =>
    Date.now() < createdAtMs + 100
      ? { exists: true, running: false, startedAtMs: undefined, restarts: 0, health: 'none', exitCode: null }
      : { exists: true, running: true, startedAtMs: createdAtMs - 60_000, restarts: 0, health: 'none', exitCode: null },
  );
  t.teardown(() => rig.deploys.close());
  await rig.deploys.created('bot_1_1_a', 'platform');
  t.deepEqual(await rig.outcome(1), { revision: 1, outcome: 'succeeded', reason: null });
});

test("a restart on request, or a deploy, before the first run is judged makes revision 1 interrupted, not failed", async (t) => {
  const startedAtMs = Date.now();
  const restarted = firstRunRig(
    () => ({ exists: true, running: true, startedAtMs: Date.now() < startedAtMs + 50 ? startedAtMs : startedAtMs + 50, restarts: 0, health: 'none', exitCode: null }),
    () => (Date.now() >= startedAtMs + 50 ? [{ started_at: new Date(startedAtMs).toISOString(), exit_code: 137, requested: true }] : []),
  );
  t.teardown(() => restarted.deploys.close());
  await restarted.deploys.created('bot_1_1_a', 'platform');
  t.like(await restarted.outcome(1), { outcome: 'interrupted', reason: 'its first run was ended on request before it was judged' });

  const replaced = firstRunRig(() => ({ exists: true, running: true, startedAtMs: Date.now(), restarts: 0, health: 'none', exitCode: null }));
  t.teardown(() => replaced.deploys.close());
  await replaced.deploys.created('bot_1_1_b', 'platform');
  t.is(await replaced.deploys.deploy('bot_1_1_b', { change: {}, minReadyS: 0, deadlineS: 60, rollback: true }, 'platform'), 2);
  // Written before the deploy's own first record: the judging was cut before the switch.
  t.deepEqual(replaced.written.slice(0, 3).map((w) => [w.revision, w.outcome]), [[1, 'deploying'], [1, 'interrupted'], [2, 'deploying']]);
});

test("a deploy of a bot whose revision 1 an agent that died left deploying writes it interrupted first", async (t) => {
  const left = { revision: 1, spec: SPEC, by: 'platform', at: new Date(0).toISOString(), outcome: 'deploying', reason: null, ended_at: null };
  const written: [number, string][] = [];
  const history = historyWith({
    revisions: async () => (written.some(([revision]) => revision === 1) ? [] : [left]),
    revision: async (_botId: string, record: { revision: number; outcome: string }) => void written.push([record.revision, record.outcome]),
  });
  const deploys = deploysOver(runtimeWith(), history);
  t.teardown(() => deploys.close());
  t.is(await deploys.deploy('bot_1_1_a', { change: {}, minReadyS: 60, deadlineS: 60, rollback: true }, 'platform'), 2);
  t.deepEqual(written.slice(0, 2), [[1, 'interrupted'], [2, 'deploying']]);
});
