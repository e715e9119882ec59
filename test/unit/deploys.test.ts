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
