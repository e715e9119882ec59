import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { runAgentProcess, webhookReceiver } from '../helpers/agent-process.js';
import { eventually } from '../helpers/eventually.js';
import { openStream } from '../helpers/sse-client.js';
import { adminKubeConfig, botDeployment, clusterHarness } from './cluster-harness.js';

// On the real cluster, the agent killed with SIGKILL and started again over the same AGENT_DATA_DIR:
// a run that ended while it was down is recorded from the pod's `lastState` when its watch lists the
// pods again, with that run's own lines (the container's previous log); events after a cursor and
// undelivered webhooks are still there.

const SECRET = 'the webhook secret';

/** A bot that counts its runs in its pod's emptyDir: run 1 exits 3 after 2 s, run 2 after 8 s, later runs stay up. */
function countingBot(id: string) {
  const deployment = botDeployment(id, {
    script: [
      'n=$(( $(cat /runs/count 2>/dev/null || echo 0) + 1 )); echo $n > /runs/count; echo "run $n"',
      'case $n in 1) sleep 2; exit 3;; 2) sleep 8; exit 3;; esac',
      'while :; do sleep 1; done',
    ].join('\n'),
  });
  const pod = deployment.spec!.template.spec!;
  pod.volumes = [{ name: 'runs', emptyDir: {} }];
  pod.containers[0]!.volumeMounts = [{ name: 'runs', mountPath: '/runs' }];
  return deployment;
}

/** When the run an `exited` event ended had started, in ms. */
function startOf(event: { data: Record<string, unknown> }): number {
  return new Date(String((event.data.exit as { started_at: string }).started_at)).getTime();
}
const admin = adminKubeConfig();
const core = admin.makeApiClient(CoreV1Api);

test('a run that ended while the agent was down is recorded once it is back; events and webhooks survive', async (t) => {
  const { harness, namespace, agentConfig } = await clusterHarness();
  t.teardown(() => harness.close());
  const dataDir = await mkdtemp(join(tmpdir(), 'bot-agent-data-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const kubeconfig = join(dataDir, 'agent.kubeconfig');
  await writeFile(kubeconfig, agentConfig.exportConfig());
  const hooks = await webhookReceiver(3, SECRET);
  t.teardown(() => hooks.server.close());
  const runAgent = () =>
    runAgentProcess({
      AGENT_RUNTIME: 'kubernetes',
      KUBECONFIG: kubeconfig,
      AGENT_NAMESPACE: namespace,
      AGENT_DATA_DIR: dataDir,
      AGENT_WEBHOOK_URL: hooks.url,
      AGENT_WEBHOOK_SECRET: SECRET,
    });

  const first = await runAgent();
  t.teardown(() => first.process.kill('SIGKILL'));
  const everything = await openStream({ port: first.port }, '/api/events');
  const id = harness.newBotId();
  await admin.makeApiClient(AppsV1Api).createNamespacedDeployment({ namespace, body: countingBot(id) });
  const firstEnd = await everything.next((e) => e.event === 'exited' && e.data.bot_id === id, 90_000);
  const cursor = everything.events.find((e) => e.data.bot_id === id && e.event === 'started')!.id!;
  t.true(await eventually(() => hooks.refusedCount() >= 1), 'the receiver has refused a delivery');
  first.process.kill('SIGKILL');
  await once(first.process, 'exit');
  everything.close();

  // While no agent runs, the kubelet starts the bot again at once, and that run ends 8 s later.
  const firstStart = startOf(firstEnd);
  const podStatus = async () => (await core.listNamespacedPod({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items[0]?.status?.containerStatuses?.[0];
  const secondRunEnded = async () => {
    const ended = (await podStatus())?.state?.terminated?.startedAt;
    return ended !== undefined && ended.getTime() !== firstStart;
  };
  t.true(await eventually(secondRunEnded, 60_000, 250), 'the bot ran and ended again while the agent was down');

  const second = await runAgent();
  t.teardown(() => second.process.kill('SIGKILL'));
  const exits = async (): Promise<Array<{ exit_code: number; logs: string; requested: boolean; started_at: string }>> => {
    const reply = await fetch(`http://127.0.0.1:${second.port}/api/bots/${id}/exits`);
    return ((await reply.json()) as { exits: Array<{ exit_code: number; logs: string; requested: boolean; started_at: string }> }).exits;
  };
  const recorded = await eventually(async () => (await exits()).length >= 2, 20_000, 100);
  t.true(recorded, `the run that ended while the agent was down is recorded; pod: ${JSON.stringify(await podStatus())}`);
  const [down, before, ...more] = await exits();
  t.deepEqual(more, [], 'two runs ended');
  t.like(down, { exit_code: 3, requested: false, logs: 'run 2\n' });
  t.like(before, { exit_code: 3, requested: false, logs: 'run 1\n' });
  t.is(new Date(before!.started_at).getTime(), firstStart);

  // After the cursor (the first run's start): the first run's end, the second run's start if the first
  // agent saw it before it was killed, and the second run's end, each once, in order.
  const resumed = await openStream({ port: second.port }, `/api/bots/${id}/events`, { headers: { 'Last-Event-ID': cursor } });
  await resumed.next((e) => e.event === 'exited' && resumed.events.filter((x) => x.event === 'exited').length === 2);
  const replayed = resumed.events.slice(0, resumed.events.findLastIndex((e) => e.event === 'exited') + 1);
  t.true(['exited,exited', 'exited,started,exited'].includes(replayed.map((e) => e.event).join()), replayed.map((e) => e.event).join());
  t.deepEqual(replayed.filter((e) => e.event === 'exited').map(startOf), [firstStart, new Date(down!.started_at).getTime()]);
  const ids = [cursor, ...replayed.map((e) => e.id!)];
  t.deepEqual(ids.map(Number), [...ids.map(Number)].sort((a, b) => a - b), 'ids increase');

  // Every one of those events reaches the receiver, signed, in order, none missing.
  t.true(await eventually(() => ids.every((eventId) => hooks.received.some((d) => d.id === eventId)), 60_000, 200));
  const ofBot = hooks.received.filter((d) => JSON.parse(d.body).bot_id === id);
  t.true(ofBot.every((d) => d.signatureOk), 'every signature checks out');
  const order = ofBot.map((d) => Number(d.id));
  t.deepEqual(order, [...order].sort((a, b) => a - b), "one bot's deliveries arrive in order");
  t.deepEqual([...new Set(order)].map(String).slice(0, ids.length), ids);
  resumed.close();
});
