import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import test from 'ava';
import { CoreV1Api } from '@kubernetes/client-node';
import type { V1Pod } from '@kubernetes/client-node';
import type { BotHealthSpec } from '../../src/provisioning/bot-spec.js';
import { createKubernetesProvisioner } from '../../src/runtime/kubernetes/kube-provisioner.js';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { openStream } from '../helpers/sse-client.js';
import type { EventStream } from '../helpers/sse-client.js';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { adminKubeConfig, clusterHarness, HOST_ADDRESS } from './cluster-harness.js';
import type { RuntimeHarness } from '../behaviours/runtime-harness.js';
import { execInPod } from './pod-exec.js';

const run = promisify(execFile);
const IMAGE = 'bot-agent-testbot:health';
const GRACE_S = 5;

// Hung bots on the real cluster (docs/api.md §13), the harness's one agent with the chart's Role: the kubelet
// restarts a bot whose liveness probe fails, and the agent records that once and does not restart it again; a
// bot whose heartbeats (sent from its pod) stop is restarted by the watchdog (a new pod).
let harness: RuntimeHarness;
let agent: Server;
let events: EventStream;
let namespace: string;
let provisioner: ReturnType<typeof createKubernetesProvisioner>;
const core = adminKubeConfig().makeApiClient(CoreV1Api);

test.before(async () => {
  const made = await clusterHarness();
  ({ harness, namespace } = made);
  // Bots made as the agent's create makes them, without a second agent (whose watchdog would act as well).
  provisioner = createKubernetesProvisioner({ kubeConfig: made.agentConfig, namespace, agentUrl: 'http://agent:8000' });
  agent = harness.agent;
  events = await openStream(agent, '/api/events?after=0');
  // A versioned tag: Kubernetes pulls `:latest` always, and no registry is reachable here.
  await run('/usr/bin/docker', ['tag', TEST_IMAGE, IMAGE]);
  await run('bash', ['scripts/kube/images.sh', IMAGE]);
});

test.after.always(async () => {
  events?.close();
  await harness?.close();
});

async function create(id: string, script: string, health: BotHealthSpec): Promise<void> {
  const { port } = agent.address() as AddressInfo;
  await provisioner.create({
    id,
    ownerId: 'user_1',
    image: IMAGE,
    template: 'discord',
    token: 'tok-health',
    domain: undefined,
    port: undefined,
    env: { AGENT_HOST: HOST_ADDRESS, AGENT_PORT: String(port) },
    memoryLimitBytes: undefined,
    cpuLimit: undefined,
    command: ['sh', '-c', script],
    health,
  });
}

const BEATING_BOT = [
  'touch /dev/shm/beat',
  "trap 'exit 0' TERM",
  'while :; do',
  '  [ -f /dev/shm/beat ] && printf "POST /api/bots/self/heartbeat HTTP/1.0\\r\\nHost: agent\\r\\nContent-Length: 0\\r\\n\\r\\n" | nc "$AGENT_HOST" "$AGENT_PORT" > /dev/null 2>&1',
  '  sleep 1 & wait $!',
  'done',
].join('\n');

const CHECK = { intervalS: 1, timeoutS: 1, retries: 2, startPeriodS: 0, heartbeatTtlS: undefined, graceS: GRACE_S };

const podsOf = async (id: string): Promise<V1Pod[]> =>
  (await core.listNamespacedPod({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items.filter((pod) => !pod.metadata?.deletionTimestamp);
const runningPod = async (id: string): Promise<V1Pod | undefined> => (await podsOf(id)).find((pod) => pod.status?.containerStatuses?.[0]?.state?.running);
const statusOf = async (id: string) => (await call(agent, `/api/bots/${id}`)).body?.bot as { health: { status: string; check: string | null; output: string | null } };

test('a liveness probe that fails: the kubelet restarts the bot, the agent records it once as an end for its health, and does not restart it again', async (t) => {
  const id = harness.newBotId();
  // Healthy while /dev/shm/ok exists (a bot runs as a user that cannot write /tmp); each new container makes it again.
  await create(id, "touch /dev/shm/ok; trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done", {
    ...CHECK,
    exec: ['sh', '-c', 'test -f /dev/shm/ok || { echo "gateway lost"; exit 1; }'],
  });
  t.true(await eventually(async () => (await statusOf(id))?.health.status === 'healthy', 120_000, 500), 'the probe passes first');
  const pod = (await runningPod(id))!;
  const podName = pod.metadata!.name!;
  await execInPod(adminKubeConfig(), namespace, podName, ['rm', '/dev/shm/ok']);

  const exited = await events.next((event) => event.event === 'exited' && event.data.bot_id === id, 60_000);
  t.like(exited.data, { exit: { requested: false, unhealthy: { check: 'exec' } } });
  t.regex(String((exited.data.exit as { unhealthy: { output: string } }).unhealthy.output), /gateway lost/);
  const restarted = await events.next((event) => event.event === 'restarted' && event.data.bot_id === id, 10_000);
  t.like(restarted.data, { reason: 'unhealthy', by: 'kubelet', check: 'exec' });
  // (Its `unhealthy` event is not asserted: the kubelet may kill it before the pod's readiness says it failed.)
  const [record] = (await call(agent, `/api/bots/${id}/exits`)).body?.exits as Array<Record<string, unknown>>;
  t.like(record, { requested: false, unhealthy: { check: 'exec' } });

  // The kubelet restarted the container in the same pod; past the grace and more, the agent made no pod of its own.
  t.true(await eventually(async () => (await statusOf(id))?.health.status === 'healthy', 60_000, 500), 'healthy again');
  await new Promise((resolve) => setTimeout(resolve, (GRACE_S + 3) * 1000));
  const pods = await podsOf(id);
  t.deepEqual(pods.map((p) => p.metadata?.uid), [pod.metadata?.uid], 'the agent replaced the pod');
  t.is(pods[0]?.status?.containerStatuses?.[0]?.restartCount, 1, 'restarted once, by the kubelet');
  t.is(events.events.filter((event) => event.event === 'restarted' && event.data.bot_id === id).length, 1);
  t.is(events.events.filter((event) => event.event === 'exited' && event.data.bot_id === id).length, 1, 'one run ended, recorded once');
  await provisioner.remove(id);
});

test('a bot whose heartbeats stop is restarted by the watchdog: a new pod, its record an end for its health', async (t) => {
  const id = harness.newBotId();
  // It beats every second from its pod while /dev/shm/beat exists, which it makes as it starts.
  await create(id, BEATING_BOT, { ...CHECK, exec: undefined, heartbeatTtlS: 5 });
  t.true(await eventually(async () => (await statusOf(id))?.health.status === 'healthy', 120_000, 500), 'its beats arrive');
  t.like((await statusOf(id)).health, { check: 'heartbeat' });
  const first = (await runningPod(id))!;
  await execInPod(adminKubeConfig(), namespace, first.metadata!.name!, ['rm', '/dev/shm/beat']);
  const restarted = await events.next((event) => event.event === 'restarted' && event.data.bot_id === id, 60_000);
  t.like(restarted.data, { reason: 'unhealthy', by: 'watchdog', check: 'heartbeat' });
  t.true(await eventually(async () => (await runningPod(id))?.metadata?.uid !== first.metadata?.uid && (await runningPod(id)) !== undefined, 120_000, 500), 'a new pod runs');
  // The run it restarted: the one that began at its last beat's run.
  const ended = await events.next((event) => event.event === 'exited' && event.data.bot_id === id && (event.data.exit as { unhealthy: unknown }).unhealthy !== null, 30_000);
  // One restart, the watchdog's: none before it (the bot beat), and one `restarted` event.
  t.is(events.events.filter((event) => event.event === 'restarted' && event.data.bot_id === id).length, 1);
  t.is(events.events.filter((event) => event.event === 'exited' && event.data.bot_id === id).length, 1);
  t.like(ended.data.exit, { requested: false, unhealthy: { check: 'heartbeat' } });
  await provisioner.remove(id);
});
