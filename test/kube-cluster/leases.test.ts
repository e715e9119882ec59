import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import test from 'ava';
import { AppsV1Api, CoordinationV1Api, CoreV1Api, PatchStrategy, setHeaderOptions, V1MicroTime } from '@kubernetes/client-node';
import type { KubeConfig } from '@kubernetes/client-node';
import { LeaseLocks, leaseName } from '../../src/runtime/kubernetes/kube-leases.js';
import { createKubernetesDriver } from '../../src/runtime/kubernetes/kube-driver.js';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { objectName } from '../../src/runtime/kubernetes/kube-provisioner.js';
import { adminKubeConfig, agentKubeConfig, botDeployment } from './cluster-harness.js';

// Two agents on the real cluster, as two replicas of the chart with a database are: each bot's lifecycle
// operations are serialised across them by a coordination.k8s.io Lease (docs/api.md §11), under the
// chart's Role for that case.
const run = promisify(execFile);
const runId = randomBytes(3).toString('hex');
const namespace = `leases-${runId}`;
const admin = adminKubeConfig();
const apps = admin.makeApiClient(AppsV1Api);
const core = admin.makeApiClient(CoreV1Api);
const leases = admin.makeApiClient(CoordinationV1Api);
let agentConfig: KubeConfig;
const agents: TestAgent[] = [];
let bots = 0;

test.before(async () => {
  await run('bash', ['scripts/kube/images.sh', TEST_IMAGE]);
  agentConfig = await agentKubeConfig(admin, namespace, { 'database.existingSecret': 'history-db' });
});

test.after.always(async () => {
  for (const agent of agents) await agent.close();
  await core.deleteNamespace({ name: namespace }).catch(() => undefined);
});

async function agentNamed(holder: string): Promise<TestAgent> {
  const agent = await startAgent(createKubernetesDriver({ kubeConfig: agentConfig, namespace }), {
    locks: new LeaseLocks(agentConfig, namespace, holder),
  });
  agents.push(agent);
  return agent;
}

async function runningBot(): Promise<string> {
  const id = `bot_${process.pid}_${++bots}_${runId}`;
  await apps.createNamespacedDeployment({ namespace, body: botDeployment(id) });
  const running = async () =>
    (await core.listNamespacedPod({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items.some((pod) => pod.status?.phase === 'Running');
  if (!(await eventually(running, 60_000, 250))) throw new Error(`bot ${id} never ran`);
  return id;
}

const generationOf = async (id: string): Promise<number> =>
  (await apps.readNamespacedDeployment({ name: objectName(id), namespace })).metadata?.generation ?? 0;

const restartThrough = (agent: TestAgent, id: string) =>
  call(agent.server, '/api/bots/restart', { method: 'POST', body: { bot_id: id, user_id: 'user_1' } });

/** The lease an agent that died mid-restart of `id` left: taken now, never renewed, expiring in 3 s. */
async function leaseOfDeadAgent(id: string): Promise<void> {
  const now = new V1MicroTime();
  await leases.createNamespacedLease({
    namespace,
    body: {
      metadata: { name: leaseName(id), annotations: { 'bot-agent/operation': 'restart' } },
      spec: { holderIdentity: 'agent-that-died', leaseDurationSeconds: 3, acquireTime: now, renewTime: now },
    },
  });
}

test.serial('a restart asked of two agents at once restarts the bot once; both answer it', async (t) => {
  const [one, other] = await Promise.all([agentNamed('agent-a'), agentNamed('agent-b')]);
  const id = await runningBot();
  const before = await generationOf(id);
  const [first, second] = await Promise.all([restartThrough(one, id), restartThrough(other, id)]);
  t.is(first.status, 200, first.text);
  t.is(second.status, 200, second.text);
  t.is(await generationOf(id), before + 1, 'one rollout, not two');
  t.true(await eventually(async () => (await leases.listNamespacedLease({ namespace })).items.length === 0, 5_000, 100), 'the lease is gone');
});

test.serial('an agent that died mid-restart leaves its lease to expire; another then takes it over and restarts the bot itself', async (t) => {
  const [survivor] = agents.length > 0 ? agents : [await agentNamed('agent-a')];
  const id = await runningBot();
  const before = await generationOf(id);
  await leaseOfDeadAgent(id);
  const asked = Date.now();
  const reply = await restartThrough(survivor!, id);
  t.is(reply.status, 200, reply.text);
  t.true(Date.now() - asked >= 2_500, 'it waited for the lease to expire');
  t.is(await generationOf(id), before + 1, 'the bot was restarted, not left to the dead agent');
  t.true(await eventually(async () => (await leases.listNamespacedLease({ namespace })).items.length === 0, 5_000, 100), 'the lease is gone');
});

test.serial('an agent that died after beginning a restart leaves it to be finished: another waits for that rollout and does not roll out again', async (t) => {
  const [survivor] = agents.length > 0 ? agents : [await agentNamed('agent-a')];
  const id = await runningBot();
  await leaseOfDeadAgent(id);
  // What the dead agent had done: asked for the rollout, as its restart does, after taking the lease.
  await apps.patchNamespacedDeployment(
    {
      name: objectName(id),
      namespace,
      body: { spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': new Date().toISOString() } } } } },
    },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  const begun = await generationOf(id);
  const reply = await restartThrough(survivor!, id);
  t.is(reply.status, 200, reply.text);
  t.is(await generationOf(id), begun, 'the rollout the dead agent began was finished, not begun again');
  const pods = (await core.listNamespacedPod({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items;
  t.true(pods.some((pod) => pod.status?.phase === 'Running' && pod.metadata?.annotations?.['kubectl.kubernetes.io/restartedAt']), 'a restarted pod runs');
});

test.serial("a stop through one agent waits for another's restart of the same bot, then stops it", async (t) => {
  const [one, other] = agents.length >= 2 ? agents : await Promise.all([agentNamed('agent-a'), agentNamed('agent-b')]);
  const id = await runningBot();
  const before = await generationOf(id);
  let restartAnswered = false;
  const restarting = restartThrough(one!, id).finally(() => {
    restartAnswered = true;
  });
  // The restart is under way (its rollout has begun) when the stop is asked of the other agent.
  t.true(await eventually(async () => (await generationOf(id)) > before, 10_000, 20));
  const stopping = call(other!.server, '/api/bots/stop', { method: 'POST', body: { bot_id: id, user_id: 'user_1' } });
  const replicasWhileRestarting: number[] = [];
  while (!restartAnswered) {
    const replicas = (await apps.readNamespacedDeployment({ name: objectName(id), namespace })).spec?.replicas ?? -1;
    if (!restartAnswered) replicasWhileRestarting.push(replicas);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const [restart, stop] = await Promise.all([restarting, stopping]);
  t.is(restart.status, 200, restart.text);
  t.is(stop.status, 200, stop.text);
  t.true(replicasWhileRestarting.length > 0);
  t.true(replicasWhileRestarting.every((replicas) => replicas === 1), `the stop scaled the bot mid-restart: ${replicasWhileRestarting.join(' ')}`);
  t.is((await apps.readNamespacedDeployment({ name: objectName(id), namespace })).spec?.replicas, 0, 'stopped after the restart');
});
