import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import test from 'ava';
import { AppsV1Api, CoordinationV1Api, CoreV1Api, PatchStrategy, setHeaderOptions, V1MicroTime } from '@kubernetes/client-node';
import type { KubeConfig } from '@kubernetes/client-node';
import { PooledKubeConfig } from '../../src/runtime/kubernetes/kube-connection.js';
import { OperationInProgress, RuntimeUnavailable } from '../../src/errors.js';
import { LeaseLocks } from '../../src/runtime/kubernetes/kube-leases.js';
import { leaseName } from '../../src/runtime/kubernetes/kube-names.js';
import { createKubernetesDriver } from '../../src/runtime/kubernetes/kube-driver.js';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { openStream } from '../helpers/sse-client.js';
import { TcpRelay } from '../helpers/tcp-relay.js';
import { objectName } from '../../src/runtime/kubernetes/kube-names.js';
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

async function runningBot(id = `bot_${process.pid}_${++bots}_${runId}`): Promise<string> {
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

/** The lease an agent that died mid-restart of `id` left `agoMs` ago: never renewed since, expiring 3 s after it is first seen. */
async function leaseOfDeadAgent(id: string, agoMs = 0): Promise<void> {
  const now = new V1MicroTime(Date.now() - agoMs);
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

/** The agent's credentials, reaching the API server through a relay the test can freeze (test/helpers/tcp-relay.ts). */
async function relayedAgentConfig(t: { teardown(fn: () => Promise<void>): void }): Promise<{ relay: TcpRelay; relayed: KubeConfig }> {
  const server = new URL(agentConfig.getCurrentCluster()!.server);
  const relay = new TcpRelay({ host: server.hostname, port: Number(server.port) });
  const port = await relay.start();
  t.teardown(() => relay.close());
  const relayed = new PooledKubeConfig();
  relayed.loadFromOptions({
    clusters: [{ ...agentConfig.getCurrentCluster()!, name: 'local', server: `https://127.0.0.1:${port}` }],
    users: [agentConfig.getCurrentUser()!],
    contexts: [{ name: 'agent', cluster: 'local', user: agentConfig.getCurrentUser()!.name }],
    currentContext: 'agent',
  });
  return { relay, relayed };
}

/** Who held a bot's lock when, by the test's clock. */
interface Acting {
  readonly who: string;
  readonly from: number;
  to: number;
}

function overlaps(acts: Acting[]): boolean {
  return acts.some((one, i) => acts.slice(i + 1).some((other) => one.from < other.to && other.from < one.to));
}

test.serial("an agent whose clock is 30 s off never takes a live Lease: no stamp of another agent's clock is compared with its own", async (t) => {
  const id = `bot_${process.pid}_clock_${runId}`;
  const acts: Acting[] = [];
  // The holder's clock is 30 s behind, the other's 30 s ahead: by their stamps the lease expired long ago.
  const behind = new LeaseLocks(agentConfig, namespace, 'agent-behind', { durationS: 3, renewMs: 1_000, pollMs: 100, callMs: 5_000 }, () => Date.now() - 30_000);
  const ahead = new LeaseLocks(agentConfig, namespace, 'agent-ahead', undefined, () => Date.now() + 30_000);
  let release = (): void => undefined;
  const holding = behind.hold(id, 'stop', async () => {
    const act = { who: 'behind', from: Date.now(), to: Infinity };
    acts.push(act);
    await new Promise<void>((resolve) => (release = resolve));
    act.to = Date.now();
  });
  t.true(await eventually(() => acts.length === 1, 10_000, 20));
  // Asked while the holder lives (renewing every second), past its 3 s lease: refused at its own deadline.
  const refused = await t.throwsAsync(
    ahead.hold(id, 'start', async () => void acts.push({ who: 'ahead', from: Date.now(), to: Date.now() }), { waitMs: 6_000 }),
    { instanceOf: OperationInProgress },
  );
  t.regex(refused.message, /stop in progress/);
  release();
  await holding;
  t.deepEqual(acts.map((act) => act.who), ['behind']);
  t.true(await eventually(async () => (await leases.listNamespacedLease({ namespace })).items.every((lease) => lease.metadata?.name !== leaseName(id)), 5_000, 100));
});

test.serial("an agent cut off from the API server mid-operation stops acting (503) before another takes its Lease", async (t) => {
  const id = `bot_${process.pid}_cut_${runId}`;
  const { relay, relayed } = await relayedAgentConfig(t);
  const timings = { durationS: 6, renewMs: 1_000, pollMs: 100, callMs: 2_000 };
  const frozen = new LeaseLocks(relayed, namespace, 'agent-frozen', timings);
  const other = new LeaseLocks(agentConfig, namespace, 'agent-other', timings);
  const acts: Acting[] = [];
  let answered: number | undefined;
  const holding = frozen
    .hold(id, 'stop', async () => {
      const act = { who: 'frozen', from: Date.now(), to: Infinity };
      acts.push(act);
      // The stop's own work would go on; what matters is that the agent stops waiting for it, and says so.
      await new Promise((resolve) => setTimeout(resolve, 60_000));
    })
    .finally(() => (answered = Date.now()));
  t.true(await eventually(() => acts.length === 1, 10_000, 20));
  relay.freeze();
  let othersTurn = (): void => undefined;
  const taking = other.hold(
    id,
    'start',
    async () => {
      acts.push({ who: 'other', from: Date.now(), to: Date.now() });
      await new Promise<void>((resolve) => (othersTurn = resolve));
    },
    { waitMs: 30_000 },
  );
  await t.throwsAsync(holding, { instanceOf: RuntimeUnavailable, message: /could not renew the Lease/ });
  // The frozen agent stopped acting when it could no longer say it held the lease.
  acts[0]!.to = answered!;
  t.true(await eventually(() => acts.length === 2, 30_000, 20));
  t.false(overlaps(acts), JSON.stringify(acts));
  t.true(acts[1]!.from - acts[0]!.to > 1_000, 'the other took the lease a margin after the holder stopped');
  // What the frozen agent sent meanwhile arrives now: the other's lease is left alone.
  relay.thaw();
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  const lease = await leases.readNamespacedLease({ name: leaseName(id), namespace });
  t.is(lease.spec?.holderIdentity, 'agent-other');
  othersTurn();
  await taking;
});

test.serial('a restart an hour after its agent died mid-way is done again, not taken as done: the pod is really replaced and a `started` event follows', async (t) => {
  const [survivor] = agents.length > 0 ? agents : [await agentNamed('agent-a')];
  const id = await runningBot();
  // An hour ago an agent took the lease, asked for the rollout (50 minutes ago here: a later restart) and died; the rollout has long finished.
  await apps.patchNamespacedDeployment(
    {
      name: objectName(id),
      namespace,
      body: { spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': new Date(Date.now() - 3_000_000).toISOString() } } } } },
    },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  const podNames = async () =>
    (await core.listNamespacedPod({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items.filter((pod) => pod.status?.phase === 'Running' && !pod.metadata?.deletionTimestamp).map((pod) => pod.metadata?.name);
  t.true(await eventually(async () => (await podNames()).length === 1 && (await apps.readNamespacedDeployment({ name: objectName(id), namespace })).status?.updatedReplicas === 1, 60_000, 250));
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const [before] = await podNames();
  await leaseOfDeadAgent(id, 3_600_000);
  const events = await openStream(survivor!.server, `/api/bots/${id}/events`);
  t.teardown(() => events.close());
  const generation = await generationOf(id);
  const reply = await restartThrough(survivor!, id);
  t.is(reply.status, 200, reply.text);
  t.is(await generationOf(id), generation + 1, 'rolled out again');
  t.true(await eventually(async () => (await podNames()).every((name) => name !== before) && (await podNames()).length === 1, 60_000, 250), 'the pod was replaced');
  await events.next((event) => event.event === 'started', 30_000);
});

/** A bot whose process ignores SIGTERM: a stop waits its whole grace period for the pod to go. */
const STUBBORN = "trap '' TERM; while :; do sleep 1; done";

test.serial("the API server frozen for 20 s in the middle of one agent's stop, another agent asked to start the bot: each answers by its deadline, and the second acts only after the first stopped", async (t) => {
  const { relay, relayed } = await relayedAgentConfig(t);
  const deadlines = { restartTimeoutMs: 30_000 };
  const frozenAgent = await startAgent(createKubernetesDriver({ kubeConfig: relayed, namespace }), { ...deadlines, locks: new LeaseLocks(relayed, namespace, 'agent-frozen') });
  const otherAgent = await startAgent(createKubernetesDriver({ kubeConfig: agentConfig, namespace }), { ...deadlines, locks: new LeaseLocks(agentConfig, namespace, 'agent-other') });
  t.teardown(async () => {
    relay.thaw();
    await frozenAgent.close();
    await otherAgent.close();
  });
  const id = `bot_${process.pid}_${++bots}_${runId}`;
  await apps.createNamespacedDeployment({ namespace, body: botDeployment(id, { script: STUBBORN, graceS: 25 }) });
  const ready = async (agent: TestAgent) => (await call(agent.server, `/api/bots/${id}`)).body?.bot !== undefined;
  t.true(await eventually(async () => (await ready(frozenAgent)) && (await ready(otherAgent)) && (await botRunning(id)), 60_000, 250), 'both agents see the bot run');

  // What the API server applied, as the test sees it directly: the bot's wanted replicas, and when they changed.
  const replicas: Array<{ at: number; replicas: number }> = [];
  let watching = true;
  const watch = (async () => {
    while (watching) {
      const now = (await apps.readNamespacedDeployment({ name: objectName(id), namespace })).spec?.replicas ?? -1;
      if (replicas.at(-1)?.replicas !== now) replicas.push({ at: Date.now(), replicas: now });
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  const owner = { bot_id: id, user_id: 'user_1' };
  const timed = async (agent: TestAgent, operation: string) => {
    const reply = await call(agent.server, `/api/bots/${operation}`, { method: 'POST', body: owner });
    return { ...reply, answeredAt: Date.now() };
  };
  const stopping = timed(frozenAgent, 'stop');
  // In the middle of the stop: its scale applied, the pod still in its 25 s grace period.
  t.true(await eventually(() => replicas.at(-1)?.replicas === 0, 10_000, 20));
  relay.freeze();
  const frozenAt = Date.now();
  setTimeout(() => relay.thaw(), 20_000);
  const starting = timed(otherAgent, 'start');
  const [stop, start] = await Promise.all([stopping, starting]);
  watching = false;
  await watch;
  t.log(`stop ${stop.status} after ${stop.answeredAt - frozenAt} ms of the freeze; start ${start.status} after ${start.answeredAt - frozenAt} ms; replicas ${replicas.map((r) => `${r.replicas}@${r.at - frozenAt}`).join(' ')}`);
  t.is(stop.status, 503, stop.text);
  t.regex(String(stop.body?.msg), /runtime unavailable/);
  t.is(start.status, 200, start.text);
  t.true(stop.answeredAt - frozenAt < deadlines.restartTimeoutMs, 'the stop ends by its deadline');
  const started = replicas.find((change) => change.replicas === 1 && change.at > frozenAt);
  t.truthy(started, 'the other agent started the bot');
  t.true(started!.at > stop.answeredAt, 'the other agent acted only once the frozen one had stopped acting');
  // A start waits at most the time-out behind another operation (docs/api.md section 2), then answers once the pod
  // runs: its own deadline is its scale's, the pod's start on the cluster comes after it.
  t.true(started!.at - frozenAt < deadlines.restartTimeoutMs, 'the start acted within its wait for the Lease');
  t.true(start.answeredAt >= started!.at, 'the start answered once it had acted');
  t.true(await eventually(() => botRunning(id), 60_000, 250), 'the bot runs');
});

async function botRunning(id: string): Promise<boolean> {
  return (await core.listNamespacedPod({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items.some((pod) => pod.status?.phase === 'Running' && !pod.metadata?.deletionTimestamp);
}

test('bot ids that differ only in case have a Lease each: restarts of both at once, through two agents, restart both', async (t) => {
  const [one, two] = [await agentNamed(`agent-case-1-${runId}`), await agentNamed(`agent-case-2-${runId}`)];
  const upper = await runningBot(`bot_${process.pid}_${++bots}_Case${runId}`);
  const lower = await runningBot(upper.replace(`Case${runId}`, `case${runId}`));
  t.not(leaseName(upper), leaseName(lower));
  const before = await Promise.all([generationOf(upper), generationOf(lower)]);
  const replies = await Promise.all([restartThrough(one, upper), restartThrough(two, lower)]);
  t.deepEqual(replies.map((reply) => reply.status), [200, 200], replies.map((reply) => reply.text).join(' '));
  // Before, one Lease served both: the second restart joined the first and answered 200 with nothing restarted.
  t.true((await generationOf(upper)) > before[0]!, `${upper} was not restarted`);
  t.true((await generationOf(lower)) > before[1]!, `${lower} was not restarted`);
});

test.serial("during a rolling upgrade an agent of the release before, which names the bot's Lease by its id alone, and this one never act on one bot at once", async (t) => {
  const [agent] = agents.length > 0 ? agents : [await agentNamed('agent-a')];
  const id = await runningBot();
  const before = await generationOf(id);
  // What an agent of the release before does for a restart: the Lease of the older name, renewed while it acts.
  const legacy = `bot-agent-op-${id.toLowerCase().replace(/[^a-z0-9-]/g, '-')}`;
  const stamp = () => new V1MicroTime(Date.now());
  let lease = await leases.createNamespacedLease({
    namespace,
    body: { metadata: { name: legacy, annotations: { 'bot-agent/operation': 'restart' } }, spec: { holderIdentity: 'agent-of-the-release-before', leaseDurationSeconds: 15, acquireTime: stamp(), renewTime: stamp() } },
  });
  let answered = false;
  const restarting = restartThrough(agent!, id).finally(() => (answered = true));
  for (let i = 0; i < 8; i += 1) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    lease = await leases.replaceNamespacedLease({ name: legacy, namespace, body: { ...lease, spec: { ...lease.spec, renewTime: stamp() } } });
  }
  // Before, the newer agent took only the Lease of the new name and restarted the bot beside the older one.
  t.false(answered, 'the restart answered while the older agent held the bot');
  t.is(await generationOf(id), before, 'the bot was rolled out while the older agent held it');
  await leases.deleteNamespacedLease({ name: legacy, namespace });
  const reply = await restarting;
  t.is(reply.status, 200, reply.text);
  t.is(await generationOf(id), before + 1, 'restarted once the older agent was done');
  const ofBot = async () => (await leases.listNamespacedLease({ namespace })).items.filter((item) => [legacy, leaseName(id)].includes(item.metadata?.name ?? ''));
  t.true(await eventually(async () => (await ofBot()).length === 0, 5_000, 100), 'a Lease was left behind');
});
