import test from 'ava';
import { Deploys } from '../../src/deploys/deploys.js';
import type { BotHistory } from '../../src/history/bot-history.js';
import { LocalDeployMarks } from '../../src/lifecycle/deploy-marks.js';
import type { CandidateState, RevisionRuntime, RevisionSpec } from '../../src/provisioning/revisions.js';
import { eventually } from '../helpers/eventually.js';

// The deploy's hold on a bot (docs/api.md §15) ends when the bot is one run again, not once its outcome is
// written: a platform that reads the outcome and deploys again at once (as a benchmark does) is not refused.
const SPEC: RevisionSpec = { image: 'bot:1', command: null, env: [], memory_limit: null, cpu_limit: null, health: null };

test('a deploy releases the bot once its run is kept, while the outcome is still being written', async (t) => {
  const steps: string[] = [];
  const runtime: RevisionRuntime = {
    current: async () => ({ revision: 1, spec: SPEC }),
    previous: async () => undefined,
    switchTo: async () => SPEC,
    candidate: async (): Promise<CandidateState> => ({ exists: true, running: true, startedAtMs: Date.now() - 5_000, restarts: 0, health: 'none', exitCode: null }),
    lastLines: async () => '',
    keep: async () => void steps.push('kept'),
    undo: async () => void steps.push('undone'),
    rollBack: async () => ({ from: 2, to: 1 }),
    leftDeploys: async () => [],
    settle: async () => undefined,
  };
  let writeOutcome: () => void = () => undefined;
  const history = {
    revisions: async () => [],
    revision: (_botId: string, record: { outcome: string }) =>
      record.outcome === 'deploying' ? Promise.resolve() : new Promise<void>((resolve) => (writeOutcome = () => resolve())),
    note: async () => undefined,
    exits: async () => [],
    deployingRevisions: async () => [],
  } as unknown as BotHistory;
  const marks = new LocalDeployMarks();
  const deploys = new Deploys(runtime, history, marks, async () => undefined, () => undefined, undefined, { watchEveryMs: 10 });
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
  const runtime: RevisionRuntime = {
    current: async () => ({ revision: 1, spec: SPEC }),
    previous: async () => 1,
    switchTo: async () => SPEC,
    candidate: async (): Promise<CandidateState> =>
      Date.now() < startedAtMs + 100
        ? { exists: true, running: true, startedAtMs, restarts: 0, health: 'none', exitCode: null }
        : { exists: true, running: true, startedAtMs: startedAtMs + 100, restarts: 1, health: 'none', exitCode: null },
    lastLines: async () => '',
    keep: async () => undefined,
    undo: async () => undefined,
    rollBack: async () => ({ from: 2, to: 1 }),
    leftDeploys: async () => [],
    settle: async () => undefined,
  };
  const outcomes: { outcome: string; reason: string | null }[] = [];
  const history = {
    revisions: async () => [],
    revision: async (_botId: string, record: { outcome: string; reason: string | null }) => void outcomes.push(record),
    note: async () => undefined,
    exits: async () => (Date.now() >= recordedAtMs ? [{ started_at: new Date(startedAtMs).toISOString(), exit_code: 4 }] : []),
    deployingRevisions: async () => [],
  } as unknown as BotHistory;
  const deploys = new Deploys(runtime, history, new LocalDeployMarks(), async () => undefined, () => undefined, undefined, { watchEveryMs: 10 });
  t.teardown(() => deploys.close());
  await deploys.deploy('bot_1_1_a', { change: {}, minReadyS: 5, deadlineS: 60, rollback: true }, 'platform');
  t.true(await eventually(() => outcomes.some((record) => record.outcome === 'failed'), 15_000, 50));
  t.like(outcomes.find((record) => record.outcome === 'failed'), { reason: 'its run exited with code 4' });
});
