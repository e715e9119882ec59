import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import test from 'ava';
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import type { V1Pod } from '@kubernetes/client-node';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { buildAgentImage, dockerCli } from '../helpers/agent-image.js';
import { TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { CHART, helm } from '../helpers/helm.js';
import { webhookReceiver } from '../helpers/agent-process.js';
import { openStream } from '../helpers/sse-client.js';
import type { ReceivedEvent } from '../helpers/sse-client.js';
import { dropDatabases, freshDatabase } from '../helpers/postgres.js';
import { adminKubeConfig, botDeployment, HOST_ADDRESS } from './cluster-harness.js';

// The chart as operators install it for no gap: two agents sharing one history in the real PostgreSQL
// that npm test starts (reached from pods at the bridge's address), on the real cluster. A bot calls
// the Service for its own status every 100 ms through a helm upgrade and the deletion of each agent
// pod in turn: none of its calls may fail (docs/api.md §11).
const run = promisify(execFile);
const runId = randomBytes(3).toString('hex');
const namespace = `ha-${runId}`;
const image = { repository: 'bot-agent-ha', tag: runId };
const admin = adminKubeConfig();
const core = admin.makeApiClient(CoreV1Api);
const apps = admin.makeApiClient(AppsV1Api);
const kubeconfig = process.env.BOT_AGENT_KUBECONFIG ?? '';
const AGENTS = 'app.kubernetes.io/name=bot-agent';
const adminToken = randomBytes(24).toString('hex');

/** Calls its own status at the Service every 100 ms, one line per call: `ok`, or `FAIL` and the status line it got. (busybox nc: its wget crashes in the test image.) */
const CALLER = `
while :; do
  status=$(printf 'GET /api/bots/%s HTTP/1.1\\r\\nHost: agent\\r\\nConnection: close\\r\\n\\r\\n' "$2" | nc -w 5 "$1" 8000 | head -n 1)
  case "$status" in "HTTP/1.1 200"*) echo ok ;; *) echo "FAIL $(date +%T) $status" ;; esac
  sleep 0.1
done`;

test.before(async () => {
  await buildAgentImage(`${image.repository}:${image.tag}`);
  await run('bash', ['scripts/kube/images.sh', `${image.repository}:${image.tag}`, TEST_IMAGE]);
  // Pods reach the server at the bridge's address, where scripts/postgres.sh also listens.
  const url = new URL(await freshDatabase());
  url.hostname = '10.88.0.1';
  await core.createNamespace({ body: { metadata: { name: namespace } } });
  await core.createNamespacedSecret({ namespace, body: { metadata: { name: 'history-db' }, stringData: { url: url.toString() } } });
  await core.createNamespacedSecret({ namespace, body: { metadata: { name: 'agent-admin' }, stringData: { token: adminToken } } });
  await helm(
    'install', 'rel', CHART, '--namespace', namespace, '--kubeconfig', kubeconfig,
    '--set', `image.repository=${image.repository}`, '--set-string', `image.tag=${image.tag}`, '--set', 'image.pullPolicy=Never',
    '--set', 'database.existingSecret=history-db', '--set', 'adminToken.existingSecret=agent-admin', '--set', 'adminToken.key=token',
    '--wait', '--timeout', '3m',
  );
});

test.after.always(async () => {
  await helm('uninstall', 'rel', '--namespace', namespace, '--kubeconfig', kubeconfig).catch(() => undefined);
  await core.deleteNamespace({ name: namespace }).catch(() => undefined);
  await run(dockerCli, ['image', 'rm', '-f', `${image.repository}:${image.tag}`]).catch(() => undefined);
  await dropDatabases();
});

const readyAgents = async (): Promise<V1Pod[]> =>
  (await core.listNamespacedPod({ namespace, labelSelector: AGENTS })).items.filter(
    (pod) => !pod.metadata?.deletionTimestamp && (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True'),
  );

test.serial('two agents: a bot calling every 100 ms sees no failed call through a helm upgrade and the deletion of each agent pod', async (t) => {
  t.is((await readyAgents()).length, 2, 'two agents ready');
  const serviceIp = (await core.readNamespacedService({ name: 'agent', namespace })).spec?.clusterIP ?? '';
  const id = `bot_1_1_${runId}`;
  await apps.createNamespacedDeployment({ namespace, body: botDeployment(id, { script: CALLER, args: [serviceIp, id] }) });
  let caller: V1Pod | undefined;
  const callerPod = async () =>
    (await core.listNamespacedPod({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items.find((pod) => pod.status?.phase === 'Running');
  t.true(await eventually(async () => (caller = await callerPod()) !== undefined, 60_000, 250), 'the calling bot runs');
  const lines = async () =>
    (await core.readNamespacedPodLog({ namespace, name: caller?.metadata?.name ?? '', container: 'bot' })).split('\n').filter(Boolean);
  const answered = await eventually(async () => (await lines()).filter((line) => line === 'ok').length >= 10, 60_000, 500);
  t.true(answered, `its calls are answered: ${(await lines()).slice(-3).join(' | ')}`);
  if (!answered) return;

  // An upgrade that replaces every agent pod, one at a time.
  await helm(
    'upgrade', 'rel', CHART, '--namespace', namespace, '--kubeconfig', kubeconfig, '--reuse-values',
    '--set-string', `podAnnotations.rolled=${Date.now()}`, '--wait', '--timeout', '3m',
  );
  const rolled = await readyAgents();
  t.is(rolled.length, 2);
  // Each agent pod deleted in turn, the next once its replacement is ready.
  for (const pod of rolled) {
    await core.deleteNamespacedPod({ namespace, name: pod.metadata?.name ?? '' });
    t.true(
      await eventually(async () => {
        const ready = await readyAgents();
        return ready.length === 2 && !ready.some((other) => other.metadata?.name === pod.metadata?.name);
      }, 120_000, 250),
      `${pod.metadata?.name} replaced`,
    );
  }
  // The deleted pods' last seconds are over too.
  await new Promise((resolve) => setTimeout(resolve, 16_000));
  const calls = await lines();
  const failed = calls.filter((line) => line.startsWith('FAIL'));
  t.deepEqual(failed, [], `${failed.length} of ${calls.length} calls failed`);
  t.true(calls.length > 100, `${calls.length} calls made`);
});

/** The platform's call to one agent pod, by its address, with the admin token. */
const callAgentPod = (pod: V1Pod, path: string, body?: unknown): Promise<Response> =>
  fetch(`http://${pod.status?.podIP}:8000${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(90_000),
  });

const botIsReady = async (id: string): Promise<boolean> =>
  ((await apps.readNamespacedDeployment({ name: botDeployment(id).metadata!.name!, namespace })).status?.readyReplicas ?? 0) === 1;

test.serial('two replicas answer one history: the same records and state; a stream on one gets what the other recorded; a cursor from one resumes at the other', async (t) => {
  const id = `bot_1_3_${runId}`;
  await apps.createNamespacedDeployment({ namespace, body: botDeployment(id) });
  t.true(await eventually(() => botIsReady(id), 90_000, 250), 'the bot runs');
  const [one, other] = await readyAgents();
  const auth = { authorization: `Bearer ${adminToken}` };
  const onOne = await openStream({ host: one!.status?.podIP, port: 8000 }, `/api/bots/${id}/events`, { headers: auth });
  t.is(onOne.status, 200);

  const stopped = await callAgentPod(other!, '/api/bots/stop', { bot_id: id, user_id: 'user_1' });
  t.is(stopped.status, 200, await stopped.text());
  const operation = await onOne.next((event) => event.event === 'operation');
  t.like(operation.data, { operation: 'stop', result: 'ok', by: 'platform' });
  await onOne.next((event) => event.event === 'exited');
  const exitsAt = async (agent: V1Pod) => ((await (await callAgentPod(agent, `/api/bots/${id}/exits?limit=50`)).json()) as { exits: unknown[] }).exits;
  const statusAt = async (agent: V1Pod) => ((await (await callAgentPod(agent, `/api/bots/${id}`)).json()) as { bot: unknown }).bot;
  t.true(await eventually(async () => (await exitsAt(one!)).length === 1 && (await exitsAt(other!)).length === 1, 20_000, 250), 'the stopped run recorded once');
  t.deepEqual(await exitsAt(one!), await exitsAt(other!));
  t.deepEqual(await statusAt(one!), await statusAt(other!));

  // What one replica sent last is a cursor the other resumes from: the start's events, none skipped.
  const cursor = onOne.events.at(-1)!.id ?? '';
  const started = await callAgentPod(other!, '/api/bots/start', { bot_id: id, user_id: 'user_1' });
  t.is(started.status, 200, await started.text());
  const fromOther = await openStream({ host: other!.status?.podIP, port: 8000 }, `/api/bots/${id}/events`, { headers: { ...auth, 'last-event-id': cursor } });
  const isStart = (event: ReceivedEvent) => event.event === 'operation' && event.data.operation === 'start';
  const [startOnOne] = await Promise.all([onOne.next(isStart), fromOther.next(isStart)]);
  const afterCursor = onOne.events.slice(onOne.events.findIndex((event) => event.id === cursor) + 1);
  const upToStart = (events: ReceivedEvent[]) => events.slice(0, events.findIndex((event) => event.id === startOnOne.id) + 1).map((event) => event.id);
  t.deepEqual(upToStart(fromOther.events), upToStart(afterCursor), 'the same events after the cursor, at either replica');
  t.true(upToStart(fromOther.events).length >= 1);
  onOne.close();
  fromOther.close();
});

/** The agent's own process in a pod, found on this node (the cluster's only one) by the pod's cgroup. */
async function agentProcessOf(pod: V1Pod): Promise<number[]> {
  const uid = pod.metadata?.uid ?? 'none';
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const [cgroup, command] = await Promise.all([
      readFile(`/proc/${entry}/cgroup`, 'utf8').catch(() => ''),
      readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => ''),
    ]);
    if ((cgroup.includes(uid) || cgroup.includes(uid.replaceAll('-', '_'))) && command.includes('dist/agent.mjs')) found.push(Number(entry));
  }
  return found;
}

test.serial('an agent SIGKILLed while it restarts a bot: the other agent answers, and finishes that restart rather than rolling out again', async (t) => {
  const id = `bot_1_2_${runId}`;
  const bot = botDeployment(id);
  // A new pod ready only after 8 s: the restart is long enough under way to kill its agent in.
  bot.spec!.template.spec!.containers[0]!.readinessProbe = { exec: { command: ['true'] }, initialDelaySeconds: 8, periodSeconds: 1 };
  await apps.createNamespacedDeployment({ namespace, body: bot });
  const readyBot = () => botIsReady(id);
  t.true(await eventually(readyBot, 90_000, 250), 'the bot is ready');
  const generation = async () => (await apps.readNamespacedDeployment({ name: bot.metadata!.name!, namespace })).metadata?.generation ?? 0;
  const before = await generation();
  const [doomed, survivor] = await readyAgents();
  const victim = await agentProcessOf(doomed!);
  t.is(victim.length, 1, `the agent process of ${doomed!.metadata?.name} on this node`);

  const first = callAgentPod(doomed!, '/api/bots/restart', { bot_id: id, user_id: 'user_1' }).then(
    (reply) => reply.status,
    () => 'no answer' as const,
  );
  t.true(await eventually(async () => (await generation()) > before, 10_000, 20), 'its restart began');
  process.kill(victim[0]!, 'SIGKILL');
  t.is(await first, 'no answer', 'the killed agent never answered');

  const status = await callAgentPod(survivor!, `/api/bots/${id}`);
  t.is(status.status, 200, 'the surviving agent answers at once');
  // The caller asks again, of the agent left: it waits out the dead agent's lease, then sees its restart through.
  const again = await callAgentPod(survivor!, '/api/bots/restart', { bot_id: id, user_id: 'user_1' });
  t.is(again.status, 200, await again.text());
  t.is(await generation(), before + 1, 'one rollout: the restart was finished, not made twice');
  t.true(await readyBot(), 'the bot runs, restarted');
});

test.serial('a webhook receiver gets every event of a bot, in order, none missing, when the replica delivering one is SIGKILLed mid-delivery', async (t) => {
  const secret = randomBytes(16).toString('hex');
  // Pods reach the test's receiver at the bridge's address.
  const hooks = await webhookReceiver(0, secret, { holdFirst: true, host: HOST_ADDRESS });
  t.teardown(() => void hooks.server.close());
  await core.createNamespacedSecret({ namespace, body: { metadata: { name: 'hooks' }, stringData: { secret, url: hooks.url } } });
  await helm(
    'upgrade', 'rel', CHART, '--namespace', namespace, '--kubeconfig', kubeconfig, '--reuse-values',
    '--set', 'webhook.existingSecret=hooks', '--set', 'webhook.key=secret', '--wait', '--timeout', '3m',
  );
  // The old agents gone too: until then they record events as well, and, configured without the webhook, queue none.
  const onlyNewAgents = async () =>
    (await readyAgents()).length === 2 && (await core.listNamespacedPod({ namespace, labelSelector: AGENTS })).items.length === 2;
  t.true(await eventually(onlyNewAgents, 120_000, 250), 'both agents ready, with the webhook, and no other');
  const id = `bot_1_4_${runId}`;
  await apps.createNamespacedDeployment({ namespace, body: botDeployment(id) });
  // The first delivery (the bot's start) is held by the receiver: the agent sending it is killed meanwhile.
  const sender = await hooks.held;
  const agents = await readyAgents();
  const doomed = agents.find((pod) => pod.status?.podIP === sender);
  const survivor = agents.find((pod) => pod !== doomed);
  t.truthy(doomed, `the delivery came from an agent pod (${sender})`);
  const victim = await agentProcessOf(doomed!);
  t.is(victim.length, 1);
  process.kill(victim[0]!, 'SIGKILL');

  t.true(await eventually(() => botIsReady(id), 90_000, 250), 'the bot runs');
  const stopped = await callAgentPod(survivor!, '/api/bots/stop', { bot_id: id, user_id: 'user_1' });
  t.is(stopped.status, 200, await stopped.text());
  const stream = await openStream({ host: survivor!.status?.podIP, port: 8000 }, `/api/bots/${id}/events`, {
    headers: { authorization: `Bearer ${adminToken}`, 'last-event-id': '0' },
  });
  // On Kubernetes the stop ends once the pod is gone: its run's end is recorded before the operation's.
  await Promise.all([stream.next((event) => event.event === 'exited'), stream.next((event) => event.event === 'operation')]);
  stream.close();
  const ids = stream.events.map((event) => event.id);
  t.true(ids.length >= 3, `started, operation, exited: ${ids.join(' ')}`);
  const got = () => hooks.received.filter((delivery) => JSON.parse(delivery.body).bot_id === id).map((delivery) => delivery.id);
  t.true(await eventually(() => ids.every((kept) => got().includes(kept!)), 60_000, 250), `delivered: ${got().join(' ')} of ${ids.join(' ')}`);
  t.deepEqual([...new Set(got())], ids, 'in order, each at least once');
  t.true(hooks.received.every((delivery) => delivery.signatureOk));
});
