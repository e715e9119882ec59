import test from 'ava';
import { CoreV1Api } from '@kubernetes/client-node';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { adminKubeConfig, clusterHarness } from './cluster-harness.js';
import type { RuntimeHarness } from '../behaviours/runtime-harness.js';
import { execInPod } from './pod-exec.js';

// A schedule's command on the real cluster (docs/api.md §18): Kubernetes exec in the bot's pod through the API
// server, as the chart's Role allows; its exit code and output kept, and one that hangs killed at its time-out.

let harness: RuntimeHarness;
let namespace: string;
const admin = adminKubeConfig();
const core = admin.makeApiClient(CoreV1Api);

test.before(async () => {
  const cluster = await clusterHarness();
  harness = cluster.harness;
  namespace = cluster.namespace;
});

test.after.always(() => harness?.close());

interface Run {
  state: string;
  actions: { outcome: string; message: string | null; exit_code?: number | null; timed_out?: boolean; output?: string }[];
}

test("a schedule's commands run in the bot's pod: exit code and output kept, the one that hangs gone at its time-out", async (t) => {
  const bot = await harness.createBot();
  const schedules = `/api/admin/bots/${bot.id}/schedules`;
  const made = await call(harness.agent, schedules, {
    body: {
      cron: '0 0 1 1 *',
      actions: [
        { type: 'command', command: ['sh', '-c', 'echo "in $HOSTNAME"; echo oops >&2; exit 4'], continue_on_failure: true },
        { type: 'command', command: ['sleep', '417'], timeout_s: 2, continue_on_failure: true },
        { type: 'command', command: ['echo', 'after'] },
      ],
    },
  });
  t.is(made.status, 201, made.text);
  const { id } = made.body?.schedule as { id: string };
  t.is((await call(harness.agent, `${schedules}/${id}/run`, { method: 'POST' })).status, 202);
  let run: Run | undefined;
  t.true(
    await eventually(async () => {
      run = ((await call(harness.agent, `/api/bots/${bot.id}/schedules/${id}/runs`)).body?.runs as Run[])[0];
      return run !== undefined && run.state !== 'running';
    }, 60_000, 250),
  );
  const pod = (await core.listNamespacedPod({ namespace })).items.find((one) => one.metadata?.labels?.['bot-agent/bot-id'] === bot.id || JSON.stringify(one.metadata?.labels).includes(bot.id));
  const [failing, hung, after] = run!.actions;
  t.is(run?.state, 'failed', JSON.stringify(run));
  t.like(failing, { outcome: 'failed', exit_code: 4 });
  // Standard output and error come on channels of their own: each line kept, in the order each channel had it.
  t.deepEqual(failing?.output?.split('\n').sort(), ['', `in ${pod?.metadata?.name}`, 'oops']);
  t.like(hung, { outcome: 'failed', timed_out: true });
  t.like(after, { outcome: 'succeeded', exit_code: 0, output: 'after\n' });
  const gone = await eventually(async () => !(await execInPod(admin, namespace, pod!.metadata!.name!, ['ps'])).includes('sleep 417'), 15_000, 500);
  t.true(gone, 'the hung command is gone from the pod');
});
