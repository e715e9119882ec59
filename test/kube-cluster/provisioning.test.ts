import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import test from 'ava';
import Docker from 'dockerode';
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import { createKubernetesDriver } from '../../src/runtime/kubernetes/kube-driver.js';
import { createKubernetesProvisioner } from '../../src/runtime/kubernetes/kube-provisioner.js';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { objectName } from '../../src/runtime/kubernetes/kube-names.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgentOptions } from '../helpers/agent.js';
import { chatReceiver } from '../helpers/chat-receiver.js';
import { CHAT_EVENTS } from '../../src/config.js';
import { webhookReceiver } from '../helpers/webhook-receiver.js';
import { TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { adminKubeConfig, clusterHarness } from './cluster-harness.js';
import { execInPod } from './pod-exec.js';
import { pushedImage, REGISTRY_LOGIN, testRegistry } from '../helpers/registry.js';

const run = promisify(execFile);
const IMAGE = 'bot-agent-testbot:provisioning';

/** An agent that provisions on the real cluster, as the chart's ServiceAccount, with the test image on the node. */
async function provisioningAgent(t: { teardown(fn: () => Promise<void>): void }, options: TestAgentOptions = {}) {
  // This agent alone restarts the namespace's bots (crash back-offs, docs/api.md §13): another with a store of its own would act too.
  const { harness, namespace, agentConfig } = await clusterHarness({}, 'off');
  // Its loopback registries listed, as an operator lists a local registry (AGENT_REGISTRIES).
  const provisioner = createKubernetesProvisioner({ kubeConfig: agentConfig, namespace, agentUrl: 'http://agent:8000', registries: [testRegistry(), '127.0.0.1:1', 'docker.io'] });
  const agent = await startAgent(createKubernetesDriver({ kubeConfig: agentConfig, namespace }), { watchdog: {}, ...options }, '127.0.0.1', provisioner);
  t.teardown(async () => {
    await agent.close();
    await harness.close();
  });
  // A versioned tag: Kubernetes pulls `:latest` always, and no registry is reachable here.
  await run('/usr/bin/docker', ['tag', TEST_IMAGE, IMAGE]);
  await run('bash', ['scripts/kube/images.sh', IMAGE]);
  return { harness, namespace, agent };
}

// Provisioning on the real cluster, as the chart's ServiceAccount: the platform
// creates a bot through the agent, and its Deployment and Secret really run it,
// with the whole bot environment of docs/api.md §6 inside the pod.
test('a bot created through the agent runs, with every bot variable inside its pod, and is removed again', async (t) => {
  const { harness, namespace, agent } = await provisioningAgent(t);
  const id = harness.newBotId();
  const token = `secret-${id}`;
  const created = await call(agent.server, '/api/admin/bots', {
    body: { bot_id: id, user_id: 'user_9', image: IMAGE, template: 'telegram', token, domain: 'bot.example.com', port: 3000, command: ['sh', '-c', 'sleep 3600'], init: true },
  });
  t.is(created.status, 201, created.text);
  const core = adminKubeConfig().makeApiClient(CoreV1Api);
  const running = async () =>
    (await core.listNamespacedPod({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items.find((pod) => pod.status?.phase === 'Running');
  t.true(await eventually(async () => (await running()) !== undefined, 90_000, 500), 'the created bot never ran');
  const pod = (await running())?.metadata?.name ?? '';
  const env = Object.fromEntries(
    (await execInPod(adminKubeConfig(), namespace, pod, ['env']))
      .trim()
      .split('\n')
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
  t.like(env, {
    BOT_ID: id,
    USER_ID: 'user_9',
    TEMPLATE: 'telegram',
    DOMAIN: 'bot.example.com',
    PORT: '3000',
    PLATFORM_AGENT_URL: 'http://agent:8000',
    BOT_TOKEN: token,
    DISCORD_TOKEN: token,
    DISCORD_BOT_TOKEN: token,
    TELEGRAM_BOT_TOKEN: token,
    TOKEN: token,
    API_TOKEN: token,
  });
  t.notRegex(created.text, new RegExp(token));
  // Restricted: no ServiceAccount token to reach the cluster's API with, not root, no privileges to gain.
  const inside = await execInPod(adminKubeConfig(), namespace, pod, [
    'sh',
    '-c',
    'id -u; ls /var/run/secrets/kubernetes.io/serviceaccount 2>&1 || true; grep -E "^(CapEff|NoNewPrivs)" /proc/self/status',
  ]);
  t.regex(inside, /^10001\n/);
  t.regex(inside, /No such file or directory/);
  t.regex(inside, /CapEff:\s+0+\n/);
  t.regex(inside, /NoNewPrivs:\s+1/);
  const spec = (await core.readNamespacedPod({ name: pod, namespace })).spec;
  t.is(spec?.automountServiceAccountToken, false);
  // `init`: the pod's pause process is PID 1 (it reaps), and the bot's shell is not, so SIGTERM ends it.
  t.is(spec?.shareProcessNamespace, true);
  t.regex(await execInPod(adminKubeConfig(), namespace, pod, ['cat', '/proc/1/cmdline']), /pause/);
  t.like(spec?.securityContext, { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
  t.like(spec?.containers[0]?.securityContext, { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
  // Never unbounded on the node's disk, never scheduled as free.
  t.like(spec?.containers[0]?.resources, { requests: { cpu: '50m', memory: String(64 * 1024 * 1024), 'ephemeral-storage': '64Mi' }, limits: { 'ephemeral-storage': '1Gi' } });
  t.is((await call(agent.server, `/api/admin/bots/${id}`, { method: 'DELETE' })).status, 200);
  t.true(await eventually(async () => (await core.listNamespacedPod({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items.length === 0, 60_000, 500));
});

// A cluster that will not make the bot's pod (here a quota of none; a full node alike) is no pull to wait for
// (docs/api.md §14): the create answers 201 at once and the bot runs once there is room. It waited out
// AGENT_PULL_TIMEOUT_S (5 minutes) before, which this test's own bound does not allow.
test('a create the cluster has no room for answers 201 without waiting for a pull; the bot runs once there is room', async (t) => {
  t.timeout(120_000);
  const { harness, namespace, agent } = await provisioningAgent(t);
  const core = adminKubeConfig().makeApiClient(CoreV1Api);
  await core.createNamespacedResourceQuota({ namespace, body: { metadata: { name: 'no-pods' }, spec: { hard: { pods: '0' } } } });
  const id = harness.newBotId();
  const created = await call(agent.server, '/api/admin/bots', {
    body: { bot_id: id, user_id: 'user_9', image: IMAGE, template: 'discord', token: `secret-${id}`, command: ['sh', '-c', 'sleep 3600'] },
  });
  t.is(created.status, 201, created.text);
  const pods = async () => (await core.listNamespacedPod({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items;
  t.is((await pods()).length, 0);
  await core.deleteNamespacedResourceQuota({ name: 'no-pods', namespace });
  t.true(await eventually(async () => (await pods()).some((pod) => pod.status?.phase === 'Running'), 90_000, 500), 'the bot never ran once there was room');
});

// A restart policy on the real cluster (docs/api.md §13): the kubelet restarts the crashing container with its
// back-off, the agent counts the crashes from the pod's runs and, past the policy, scales the bot to nothing.
test('a bot that crashes past its restart policy is scaled to nothing and given up on; a start through the agent runs it again', async (t) => {
  const { harness, namespace, agent } = await provisioningAgent(t);
  const id = harness.newBotId();
  const givenUp: string[] = [];
  agent.history.follow((event) => {
    if (event.botId === id && event.type === 'given-up') givenUp.push(event.data);
  });
  // It crashes for its first 40 s (the node's clock is this machine's), and runs once started after that.
  const crashUntilS = Math.ceil(Date.now() / 1000) + 40;
  const command = ['sh', '-c', `if [ "$(date +%s)" -lt ${crashUntilS} ]; then echo crashing; exit 3; fi; sleep 3600`];
  const created = await call(agent.server, '/api/admin/bots', {
    body: { bot_id: id, user_id: 'user_9', image: IMAGE, template: 'telegram', token: `secret-${id}`, command, restart_policy: { max_crashes: 2 } },
  });
  t.is(created.status, 201, created.text);
  const apps = adminKubeConfig().makeApiClient(AppsV1Api);
  const replicas = async () => (await apps.listNamespacedDeployment({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items[0]?.spec?.replicas;
  // Two crashes: the first at once, the second after the kubelet's first back-off (10 s).
  t.true(await eventually(async () => ((await call(agent.server, `/api/bots/${id}`)).body?.bot as { state?: string } | undefined)?.state === 'given-up', 120_000, 500), 'never given up on');
  t.is(await replicas(), 0);
  t.is(givenUp.length, 1);
  t.like(JSON.parse(givenUp[0]!), { crashes: 2, window_s: 600, max_crashes: 2 });
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, crashUntilS * 1000 + 1_000 - Date.now())));
  const started = await call(agent.server, '/api/bots/start', { body: { bot_id: id, user_id: 'user_9' } });
  t.is(started.status, 200, started.text);
  t.is(await replicas(), 1);
  t.is(((await call(agent.server, `/api/bots/${id}`)).body?.bot as { state?: string } | undefined)?.state, 'running');
  t.is(givenUp.length, 1);
  t.is((await call(agent.server, `/api/admin/bots/${id}`, { method: 'DELETE' })).status, 200);
});

// The crash back-off on the real cluster (docs/api.md §13): from the second crash in the window the agent scales
// the bot to nothing for backoff_s, doubling up to backoff_max_s, then back to one.
test('a bot that keeps crashing is scaled to nothing for its back-off, doubling, then runs again', async (t) => {
  const { harness, agent, namespace } = await provisioningAgent(t);
  const id = harness.newBotId();
  const backOffs: Record<string, unknown>[] = [];
  agent.history.follow((event) => {
    if (event.botId === id && event.type === 'backing-off') backOffs.push(JSON.parse(event.data) as Record<string, unknown>);
  });
  const created = await call(agent.server, '/api/admin/bots', {
    body: { bot_id: id, user_id: 'user_9', image: IMAGE, template: 'telegram', token: `secret-${id}`, command: ['sh', '-c', 'trap "exit 0" TERM; sleep 2 & wait $!; exit 3'], restart_policy: { backoff_s: 3, backoff_max_s: 5 } },
  });
  t.is(created.status, 201, created.text);
  const apps = adminKubeConfig().makeApiClient(AppsV1Api);
  const replicas = async () => (await apps.listNamespacedDeployment({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items[0]?.spec?.replicas;
  t.true(await eventually(() => backOffs.length >= 1, 120_000, 200), 'never backed off');
  t.like(backOffs[0], { crashes: 2, wait_s: 3 });
  t.true(await eventually(async () => (await replicas()) === 0, 10_000, 100), 'not scaled to nothing');
  t.true(await eventually(async () => (await replicas()) === 1, 30_000, 200), 'not run again after its back-off');
  t.true(await eventually(() => backOffs.length >= 2, 120_000, 200), 'never backed off again');
  t.like(backOffs[1], { crashes: 3, wait_s: 5 });
  t.is((await call(agent.server, `/api/admin/bots/${id}`, { method: 'DELETE' })).status, 200);
});

// Images from the test registry (docs/api.md §14): the kubelet pulls with the create's login, through
// containerd's hosts.toml for the loopback registry (scripts/kube/up.sh). A pull that fails is the create's
// error, in the kubelet's words, and leaves nothing of the bot behind.
test('a create pulls its image from the registry with its own login; a missing tag is 422 and a refused login 403, each in the kubelet\'s words, leaving nothing', async (t) => {
  const { harness, namespace, agent } = await provisioningAgent(t);
  const image = await pushedImage(new Docker(), 'kube-pull');
  const apps = adminKubeConfig().makeApiClient(AppsV1Api);
  const core = adminKubeConfig().makeApiClient(CoreV1Api);
  const create = (id: string, fields: Record<string, unknown>) =>
    call(agent.server, '/api/admin/bots', { body: { bot_id: id, user_id: 'user_9', template: 'telegram', token: `secret-${id}`, command: ['sleep', '3600'], ...fields } });
  const leftOf = async (id: string) => [
    ...(await apps.listNamespacedDeployment({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items,
    ...(await core.listNamespacedSecret({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items,
  ];

  const good = harness.newBotId();
  const pulled = await create(good, { image, registry_auth: REGISTRY_LOGIN });
  t.is(pulled.status, 201, pulled.text);
  t.true(await eventually(async () => ((await call(agent.server, `/api/bots/${good}`)).body?.bot as { state?: string } | undefined)?.state === 'running', 60_000, 500));

  const missing = harness.newBotId();
  const notFound = await create(missing, { image: image.replace(/:v1$/, ':missing'), registry_auth: REGISTRY_LOGIN });
  t.is(notFound.status, 422, notFound.text);
  t.regex(String(notFound.body?.msg), /was not found in its registry: .*not found/);
  t.deepEqual(await leftOf(missing), []);

  const refused = harness.newBotId();
  // An image of its own: the node keeps what it pulled, and uses it without asking the registry again (IfNotPresent).
  const unpulled = await pushedImage(new Docker(), 'kube-refused');
  const wrong = await create(refused, { image: unpulled, registry_auth: { username: REGISTRY_LOGIN.username, password: 'not-the-password' } });
  t.is(wrong.status, 403, wrong.text);
  t.regex(String(wrong.body?.msg), /refused the pull's credentials/);
  t.notRegex(wrong.text, /not-the-password/);
  t.deepEqual(await leftOf(refused), []);

  const anonymous = await create(harness.newBotId(), { image: unpulled });
  t.is(anonymous.status, 403, `no login: ${anonymous.text}`);
  const closed = harness.newBotId();
  const unreachable = await create(closed, { image: '127.0.0.1:1/tests/nothing:v1' });
  t.is(unreachable.status, 502, unreachable.text);
  t.regex(String(unreachable.body?.msg), /could not be reached or failed the pull: .*connection refused/);
  t.deepEqual(await leftOf(closed), []);
  t.is((await call(agent.server, `/api/admin/bots/${good}`, { method: 'DELETE' })).status, 200);
});

// Revision 1 is judged as a deploy's run is (docs/api.md §15), on the cluster from the create, while its pod's image is pulled.
test("a new bot's first run is judged on the cluster: one that exits at once has revision 1 failed, with its lines; one that stays up succeeded", async (t) => {
  const { harness, agent } = await provisioningAgent(t);
  const [failing, staying] = [harness.newBotId(), harness.newBotId()];
  const events: { type: string; data: Record<string, unknown> }[] = [];
  agent.history.follow((event) => {
    if (event.botId === failing) events.push({ type: event.type, data: JSON.parse(event.data) as Record<string, unknown> });
  });
  for (const [id, script] of [
    [failing, 'echo no config was given; exit 3'],
    [staying, 'trap "exit 0" TERM; while :; do sleep 1; done'],
  ] as const) {
    const created = await call(agent.server, '/api/admin/bots', { body: { bot_id: id, user_id: 'user_9', image: IMAGE, template: 'telegram', token: `secret-${id}`, command: ['sh', '-c', script] } });
    t.is(created.status, 201, created.text);
  }
  const first = async (id: string) => {
    let found: Record<string, unknown> | undefined;
    await eventually(async () => {
      found = (((await call(agent.server, `/api/bots/${id}/revisions`)).body?.revisions ?? []) as Record<string, unknown>[]).find((r) => r.revision === 1);
      return found !== undefined && found.outcome !== 'deploying';
    }, 150_000, 500);
    return found;
  };
  const [failed, succeeded] = await Promise.all([first(failing), first(staying)]);
  t.like(failed, { outcome: 'failed', reason: 'its run exited with code 3' });
  t.like(events.find((event) => event.type === 'deploy-failed')?.data, { revision: 1, rolled_back: false });
  t.regex(String(events.find((event) => event.type === 'deploy-failed')?.data.logs), /no config was given/);
  t.like(succeeded, { outcome: 'succeeded', reason: null });
  for (const id of [failing, staying]) t.is((await call(agent.server, `/api/admin/bots/${id}`, { method: 'DELETE' })).status, 200);
});

// Deploys on the real cluster (docs/api.md §15): a rollout with the Recreate strategy, judged by the agent,
// undone to the revision kept on the Deployment.
test('deploys on the real cluster: a good revision keeps the bot\'s token; a crashing one, a failing check, a missing tag (422) and a refused login (403) each leave the one before running; a rollback goes back; never two pods', async (t) => {
  const { harness, namespace, agent } = await provisioningAgent(t);
  const id = harness.newBotId();
  const events: { type: string; data: Record<string, unknown> }[] = [];
  agent.history.follow((event) => {
    if (event.botId === id) events.push({ type: event.type, data: JSON.parse(event.data) as Record<string, unknown> });
  });
  const token = `secret-${id}`;
  const created = await call(agent.server, '/api/admin/bots', {
    // Ends at once on SIGTERM: each switch of Recreate waits for the old pod to be gone.
    body: { bot_id: id, user_id: 'user_9', image: IMAGE, template: 'telegram', token, command: ['sh', '-c', 'trap "exit 0" TERM; while :; do sleep 1; done'], env: { MODE: 'one' } },
  });
  t.is(created.status, 201, created.text);
  const core = adminKubeConfig().makeApiClient(CoreV1Api);
  const pods = async () => (await core.listNamespacedPod({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items.filter((pod) => pod.status?.phase !== 'Succeeded');
  let most = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      most = Math.max(most, (await pods()).filter((pod) => pod.status?.containerStatuses?.[0]?.state?.running).length);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  })();
  /** The environment of the bot's one running pod, once there is one of `revision`. */
  const runningEnv = async (revision: number): Promise<Record<string, string>> => {
    let env: Record<string, string> = {};
    const found = await eventually(async () => {
      const pod = (await pods()).find((p) => p.status?.containerStatuses?.[0]?.state?.running && !p.metadata?.deletionTimestamp && (p.metadata?.annotations?.['bot-agent/revision'] ?? '1') === String(revision));
      if (!pod) return false;
      env = Object.fromEntries((await execInPod(adminKubeConfig(), namespace, pod.metadata!.name!, ['env'])).trim().split('\n').map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]));
      return true;
    }, 90_000, 500);
    t.true(found, `revision ${revision} never ran`);
    return env;
  };
  const revision = async (n: number) => {
    let found: Record<string, unknown> | undefined;
    await eventually(async () => {
      const list = ((await call(agent.server, `/api/bots/${id}/revisions`)).body?.revisions ?? []) as Record<string, unknown>[];
      found = list.find((r) => r.revision === n);
      return found !== undefined && found.outcome !== 'deploying';
    }, 90_000, 500);
    return found;
  };
  const deploy = (body: Record<string, unknown>) => call(agent.server, `/api/admin/bots/${id}`, { method: 'PATCH', body });
  t.is((await runningEnv(1)).MODE, 'one');

  const good = await deploy({ env: { MODE: 'two' }, min_ready_s: 2, deadline_s: 60 });
  t.is(good.status, 202, good.text);
  t.like(await revision(2), { outcome: 'succeeded' });
  // Asked for as soon as the outcome can be read: the bot is free again by then (it was a 409 for a moment).
  // min_ready_s well past the kubelet's lag: on busy cores its status said "running" for 2 s after the exit (CI).
  const crashing = await deploy({ command: ['sh', '-c', 'echo boom before the crash; exit 3'], min_ready_s: 10, deadline_s: 60 });
  t.is(crashing.status, 202, crashing.text);
  t.like(await revision(3), { outcome: 'failed', reason: 'its run exited with code 3' });
  t.regex(String(events.find((e) => e.type === 'deploy-failed')?.data.logs), /boom before the crash/);
  t.like(await runningEnv(2), { MODE: 'two', BOT_TOKEN: token, BOT_ID: id }, 'revision 2 runs again');

  const missing = await deploy({ image: `${testRegistry()}/tests/nothing:missing`, registry_auth: REGISTRY_LOGIN, deadline_s: 60 });
  t.is(missing.status, 422, missing.text);
  t.is((await runningEnv(2)).MODE, 'two', 'revision 2 runs again after the failed pull');
  const logins = async () => (await core.listNamespacedSecret({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items.map((secret) => secret.metadata?.name ?? '').filter((name) => name.includes('-pull'));
  t.deepEqual(await logins(), [], "the failed revision's login went with it");

  // An image of the registry's that the node lacks, with a wrong password: the kubelet's pull is refused.
  const image = await pushedImage(new Docker(), 'kube-deploy');
  const refused = await deploy({ image, registry_auth: { ...REGISTRY_LOGIN, password: 'not-the-password' }, deadline_s: 60 });
  t.is(refused.status, 403, refused.text);
  t.regex(String(refused.body?.msg), /refused the pull's credentials/);
  t.is((await runningEnv(2)).MODE, 'two', 'revision 2 runs again after the refused pull');
  // A revision whose check fails: the kubelet's liveness probe restarts it, and the deploy is undone.
  const unhealthy = await deploy({ health: { exec: ['sh', '-c', 'exit 1'], interval_s: 1, timeout_s: 1, retries: 1 }, min_ready_s: 5, deadline_s: 60 });
  t.is(unhealthy.status, 202, unhealthy.text);
  t.like(await revision(6), { outcome: 'failed' });
  t.is((await runningEnv(2)).MODE, 'two', 'revision 2 runs again after the failed check');

  // A new image from the registry with a login of its own revision's; revision 2 is kept to go back to.
  const pulled = await deploy({ image, registry_auth: REGISTRY_LOGIN, env: { MODE: 'seven' }, min_ready_s: 2, deadline_s: 60 });
  t.is(pulled.status, 202, pulled.text);
  t.like(await revision(7), { outcome: 'succeeded' });
  t.like(await runningEnv(7), { MODE: 'seven', BOT_TOKEN: token });
  t.is((await logins()).length, 1);

  const back = await call(agent.server, `/api/admin/bots/${id}/rollback`, { method: 'POST' });
  t.is(back.status, 200, back.text);
  t.like(back.body, { revision: 2 });
  t.like(await runningEnv(2), { MODE: 'two', BOT_TOKEN: token });
  t.like((await call(agent.server, `/api/bots/${id}/revisions`)).body, { deploys: true });
  sampling = false;
  await sampler;
  t.is(most, 1, 'two pods of the bot ran at once');
  // What an agent killed between a deploy's login and its Deployment write leaves: a login no revision names.
  await core.createNamespacedSecret({
    namespace,
    body: { metadata: { name: `${objectName(id)}-pull-r9`, labels: { [BOT_LABEL]: id } }, type: 'kubernetes.io/dockerconfigjson', stringData: { '.dockerconfigjson': '{"auths":{}}' } },
  });
  t.is((await call(agent.server, `/api/admin/bots/${id}`, { method: 'DELETE' })).status, 200);
  t.deepEqual((await core.listNamespacedSecret({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items, [], 'its token and every login went with it');
});

// A schedule on the real cluster (docs/api.md §18): every minute, a restart (a rollout), a command in the bot's pod
// (Kubernetes exec) and a deploy, each seen from the cluster's side; the run listed, and told to the bot's event
// stream, a webhook and a chat.
test('a schedule every minute restarts the bot, runs a command in its pod and deploys it, once, told to the events, a webhook and a chat', async (t) => {
  t.timeout(5 * 60_000);
  const receiver = await webhookReceiver();
  const hooks = receiver.received;
  const chats = await chatReceiver();
  t.teardown(() => {
    receiver.close();
    chats.close();
  });
  const { harness, namespace, agent } = await provisioningAgent(t, {
    webhook: { url: receiver.url, secret: 'kube-schedules-webhook-secret-0123' },
    // A success is told in the chats once asked for (AGENT_NOTIFY_EVENTS): by default only failures are.
    chats: { ntfy: { url: `${chats.url}/bot-alerts`, token: 'tk_kube-schedules' }, events: [...CHAT_EVENTS, 'schedule-succeeded'] },
  });
  const id = harness.newBotId();
  const events: string[] = [];
  agent.history.follow((event) => {
    if (event.botId === id) events.push(event.type);
  });
  const created = await call(agent.server, '/api/admin/bots', {
    body: { bot_id: id, user_id: 'user_9', image: IMAGE, template: 'discord', token: `secret-${id}`, command: ['sh', '-c', 'trap "exit 0" TERM; while :; do sleep 1; done'], env: { MODE: 'one' } },
  });
  t.is(created.status, 201, created.text);
  const apps = adminKubeConfig().makeApiClient(AppsV1Api);
  const replicaSets = async () => (await apps.listNamespacedReplicaSet({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items.length;
  t.true(await eventually(async () => ((await call(agent.server, `/api/bots/${id}`)).body?.bot as { state?: string } | undefined)?.state === 'running', 90_000, 500), 'the bot never ran');
  const setsBefore = await replicaSets();
  const made = await call(agent.server, `/api/admin/bots/${id}/schedules`, {
    body: {
      name: 'every minute',
      cron: '* * * * *',
      actions: [
        { type: 'restart' },
        { type: 'command', command: ['sh', '-c', 'echo mark-from-$(hostname)'], timeout_s: 20 },
        { type: 'deploy', deploy: { env: { MODE: 'two' }, min_ready_s: 2, deadline_s: 90 } },
      ],
    },
  });
  t.is(made.status, 201, made.text);
  const scheduleId = (made.body?.schedule as { id: string }).id;
  interface Run {
    due_at: string;
    state: string;
    actions: { outcome: string; message: string | null; output?: string }[];
  }
  let run: Run | undefined;
  t.true(
    await eventually(async () => {
      run = ((await call(agent.server, `/api/bots/${id}/schedules/${scheduleId}/runs`)).body?.runs as Run[]).find((one) => one.state !== 'running');
      return run !== undefined;
    }, 4 * 60_000, 1_000),
    'no run ended',
  );
  // Off at once: the next minute's run is not this test's.
  t.is((await call(agent.server, `/api/admin/bots/${id}/schedules/${scheduleId}/disable`, { method: 'POST' })).status, 200);
  t.is(run?.state, 'succeeded', JSON.stringify(run));
  t.is(new Date(run!.due_at).getUTCSeconds(), 0, 'due at a whole minute');
  // The cluster's side: the restart and the deploy each rolled out a ReplicaSet; the command ran in the bot's pod.
  t.true((await replicaSets()) >= setsBefore + 2, `${await replicaSets()} ReplicaSets, ${setsBefore} before`);
  const deployment = await apps.readNamespacedDeployment({ name: objectName(id), namespace });
  t.true(JSON.stringify(deployment.spec?.template.spec?.containers[0]?.env).includes('"MODE","value":"two"'), JSON.stringify(deployment.spec?.template.spec?.containers[0]?.env));
  t.regex(run!.actions[1]?.output ?? '', new RegExp(`mark-from-${objectName(id)}-`));
  const revisions = (await call(agent.server, `/api/bots/${id}/revisions`)).body?.revisions as { revision: number; outcome: string }[];
  t.deepEqual(revisions.slice(0, 2).map((one) => one.revision), [2, 1]);
  t.is(revisions[0]?.outcome, 'succeeded');
  // Revision 1 succeeded, or the schedule's restart came while it was still judged (docs/api.md §15).
  t.true(['succeeded', 'interrupted'].includes(revisions[1]?.outcome ?? ''), revisions[1]?.outcome);
  t.true(await eventually(() => events.includes('schedule-succeeded'), 15_000), events.join(', '));
  t.true(events.includes('schedule-started') && events.includes('operation'), events.join(', '));
  t.true(await eventually(() => hooks.some((hook) => hook.type === 'schedule-succeeded' && hook.schedule_id === scheduleId), 30_000), 'the webhook was told');
  t.true(await eventually(() => chats.received.some((one) => one.chat === 'ntfy' && JSON.stringify(one.body).includes(id) && /scheduled run/.test(JSON.stringify(one.body))), 30_000), 'the chat was told');
  t.is((await call(agent.server, `/api/admin/bots/${id}`, { method: 'DELETE' })).status, 200);
});

// A bot's data on the real cluster (docs/api.md §19): a claim of the bot's own, bound to one of the node's
// folders (scripts/kube/volumes.sh). Each run adds one to a counter in it: every restart, deploy, undone deploy,
// rollback and create again after a removal with keep_data finds what the run before it wrote.
test("a bot's data folder is a claim of its own: its counter outlives a restart, a deploy, a failed deploy undone, a rollback and a removal with keep_data", async (t) => {
  t.timeout(600_000);
  const { harness, namespace, agent } = await provisioningAgent(t);
  const id = harness.newBotId();
  const core = adminKubeConfig().makeApiClient(CoreV1Api);
  const claim = `${objectName(id)}-data`;
  const counting = ['sh', '-c', 'n=$(cat /data/count 2>/dev/null || echo 0); echo $((n + 1)) > /data/count; trap "exit 0" TERM; while :; do sleep 1; done'];
  const body = { bot_id: id, user_id: 'user_9', image: IMAGE, template: 'n8n', token: `secret-${id}`, command: counting, data: [{ path: '/data', size_mb: 64 }] };
  const created = await call(agent.server, '/api/admin/bots', { body });
  t.is(created.status, 201, created.text);
  /** The counter as the bot's one running pod reads it, once it is `count`; what it was last read otherwise. */
  const counter = async (count: number): Promise<string> => {
    let seen = 'no running pod';
    await eventually(async () => {
      const pod = (await core.listNamespacedPod({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items.find(
        (p) => p.status?.containerStatuses?.[0]?.state?.running && !p.metadata?.deletionTimestamp,
      );
      if (!pod) return false;
      seen = (await execInPod(adminKubeConfig(), namespace, pod.metadata!.name!, ['cat', '/data/count']).catch((err: Error) => err.message)).trim();
      return seen === String(count);
    }, 120_000, 500);
    return seen;
  };
  t.is(await counter(1), '1');
  const made = await core.readNamespacedPersistentVolumeClaim({ name: claim, namespace });
  t.like(made, { metadata: { labels: { [BOT_LABEL]: id } }, spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '64Mi' } } }, status: { phase: 'Bound' } });
  t.like((await call(agent.server, `/api/bots/${id}`)).body?.bot, { data: [{ path: '/data' }] });

  t.is((await call(agent.server, '/api/bots/restart', { body: { bot_id: id, user_id: 'user_9' } })).status, 200);
  t.is(await counter(2), '2', 'a restart');
  const revision = async (n: number) => {
    let found: Record<string, unknown> | undefined;
    await eventually(async () => {
      found = (((await call(agent.server, `/api/bots/${id}/revisions`)).body?.revisions ?? []) as Record<string, unknown>[]).find((r) => r.revision === n);
      return found !== undefined && found.outcome !== 'deploying';
    }, 120_000, 500);
    return found;
  };
  const deploy = (change: Record<string, unknown>) => call(agent.server, `/api/admin/bots/${id}`, { method: 'PATCH', body: { min_ready_s: 2, deadline_s: 90, ...change } });
  t.is((await deploy({ env: { MODE: 'two' } })).status, 202);
  t.like(await revision(2), { outcome: 'succeeded' });
  t.is(await counter(3), '3', 'a deploy');
  t.is((await deploy({ command: ['sh', '-c', 'exit 3'], min_ready_s: 10 })).status, 202); // past the kubelet's lag
  t.like(await revision(3), { outcome: 'failed' });
  t.is(await counter(4), '4', 'a failed deploy undone');
  const back = await call(agent.server, `/api/admin/bots/${id}/rollback`, { method: 'POST' });
  t.is(back.status, 200, back.text);
  t.is(await counter(5), '5', 'a rollback');

  const kept = await call(agent.server, `/api/admin/bots/${id}?keep_data=true`, { method: 'DELETE' });
  t.is(kept.status, 200, kept.text);
  t.regex(String(kept.body?.message), /its data \(\/data\) is kept/);
  t.true(await eventually(async () => (await core.listNamespacedPod({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items.length === 0, 60_000, 500));
  t.like(await core.readNamespacedPersistentVolumeClaim({ name: claim, namespace }), { metadata: { labels: { [BOT_LABEL]: id } } });
  t.is((await call(agent.server, '/api/admin/bots', { body })).status, 201);
  t.is(await counter(6), '6', 'a create again takes up the kept claim');

  const removed = await call(agent.server, `/api/admin/bots/${id}`, { method: 'DELETE' });
  t.regex(String(removed.body?.message), /with its data \(\/data\)/);
  t.true(await eventually(async () => (await core.listNamespacedPersistentVolumeClaim({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items.length === 0, 60_000, 500), 'the claim outlived the removal');
  // A claim of that name that is not the bot's is never taken over.
  await core.createNamespacedPersistentVolumeClaim({ namespace, body: { metadata: { name: claim }, spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Mi' } } } } });
  const foreign = await call(agent.server, '/api/admin/bots', { body });
  t.is(foreign.status, 422, foreign.text);
  t.regex(String(foreign.body?.msg), /is not bot .*'s data: it is not taken over/);
  t.deepEqual((await adminKubeConfig().makeApiClient(AppsV1Api).listNamespacedDeployment({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items, []);
  t.deepEqual((await core.listNamespacedSecret({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items, [], 'the refused create left no Secret');
});

/** The log history as the tests on it keep it (docs/api.md §21). */
const LOG_HISTORY = { ratePerSecond: 200, retention: { days: 7, botBytes: 100_000_000, totalBytes: 1_000_000_000 } };

/** A telegram bot of the test image made through the agent, with `fields` of the create beside its own. */
const createdTelegramBot = (server: Parameters<typeof call>[0], id: string, fields: Record<string, unknown>) =>
  call(server, '/api/admin/bots', { body: { bot_id: id, user_id: 'user_9', image: IMAGE, template: 'telegram', token: `secret-${id}`, ...fields } });

// The log history on the real cluster (docs/api.md §21): each pod's output kept as it is written, a run each,
// across a restart (a new pod) and a deploy (a new ReplicaSet's pod), and searched by text through the agent.
test("a bot's output on the cluster is kept across a restart and a deploy, a run each, and found by text", async (t) => {
  const { harness, agent } = await provisioningAgent(t, { logHistory: LOG_HISTORY });
  const id = harness.newBotId();
  const created = await createdTelegramBot(agent.server, id, {
    env: { MODE: 'one' },
    // Its token, and the projected token it names itself with, printed: the history keeps neither.
    command: ['sh', '-c', 'echo "run-begins $(cat /proc/sys/kernel/random/uuid) mode=$MODE"; echo "tokens $BOT_TOKEN $(cat $PLATFORM_AGENT_TOKEN_FILE)"; trap "exit 0" TERM; while :; do sleep 1 & wait $!; done'],
  });
  t.is(created.status, 201, created.text);
  type Line = { line: string; run: string | null; at: string };
  const runs = async (count: number): Promise<Line[]> => {
    let lines: Line[] = [];
    await eventually(async () => {
      const reply = await call(agent.server, `/api/bots/${id}/logs/history?q=run-begins&order=oldest`);
      lines = (reply.body?.lines ?? []) as Line[];
      return lines.length >= count;
    }, 90_000, 500);
    t.is(lines.length, count, JSON.stringify(lines));
    return lines;
  };
  await runs(1);
  t.is((await call(agent.server, '/api/bots/restart', { body: { bot_id: id, user_id: 'user_9' } })).status, 200);
  await runs(2);
  const deployed = await call(agent.server, `/api/admin/bots/${id}`, { method: 'PATCH', body: { env: { MODE: 'two' }, min_ready_s: 1, deadline_s: 90 } });
  t.is(deployed.status, 202, deployed.text);
  const lines = await runs(3);
  t.is(new Set(lines.map((line) => line.line)).size, 3, 'each run once');
  t.is(new Set(lines.map((line) => line.run)).size, 3, 'each line names its own run');
  t.regex(lines[2]!.line, /mode=two$/);
  const tokens = await call(agent.server, `/api/bots/${id}/logs/history?q=tokens&order=oldest`);
  t.deepEqual(
    (tokens.body?.lines as Line[]).map((line) => line.line),
    ['tokens *** ***', 'tokens *** ***', 'tokens *** ***'],
    'the token from its Secret and the projected token, masked in every run',
  );
  t.deepEqual((await call(agent.server, `/api/bots/${id}/logs/history?q=secret-${id}`)).body?.lines, []);
});

// Alert rules on the real cluster (docs/api.md §22): a line rule and a memory rule (the pod's use as metrics-server
// reads it, against its limit) each tell the chats once per cooldown, the matching line or the use in the message.
test('on the cluster a line rule and a memory rule each tell the chats once per cooldown', async (t) => {
  t.timeout(4 * 60_000);
  const chats = await chatReceiver();
  t.teardown(() => chats.close());
  const { harness, agent } = await provisioningAgent(t, {
    logHistory: LOG_HISTORY,
    chats: { ntfy: { url: `${chats.url}/alerts`, token: undefined }, events: ['alert'] },
  });
  const id = harness.newBotId();
  const created = await createdTelegramBot(agent.server, id, {
    memory_limit: 64 * 1024 * 1024,
    // About 24 MiB held of its 64 MiB limit, and a rate-limited request every 0.3 s.
    command: ['sh', '-c', 'x=$(head -c 24000000 /dev/zero | tr "\\0" a); i=0; while :; do echo "GET /api 429 Too Many Requests ($i)"; i=$((i+1)); sleep 0.3; done'],
  });
  t.is(created.status, 201, created.text);
  const rule = async (body: Record<string, unknown>) => t.is((await call(agent.server, '/api/admin/alerts', { body: { bot_id: id, ...body } })).status, 201);
  await rule({ name: 'rate limited', kind: 'line', q: '429 Too Many', cooldown_s: 600 });
  await rule({ name: 'memory high', kind: 'memory', above_percent: 20, window_s: 5, cooldown_s: 600 });
  const told = (name: string) => chats.received.filter((one) => JSON.stringify(one.body).includes(id) && JSON.stringify(one.body).includes(`alert \\"${name}\\"`));
  const both = await eventually(() => told('rate limited').length >= 1 && told('memory high').length >= 1, 150_000, 500);
  t.true(both, `${JSON.stringify(chats.received.map((one) => one.body))}; stats: ${(await call(agent.server, `/api/bots/${id}/stats`)).text}`);
  t.regex(JSON.stringify(told('rate limited')[0]!.body), /GET \/api 429 Too Many Requests \(\d+\)/);
  t.regex(JSON.stringify(told('memory high')[0]!.body), /memory at \d+\.\d% for \d+ s \(above 20%\)/);
  // Lines match all the while and the use stays high: within the cooldowns, neither is told again.
  await new Promise((resolve) => setTimeout(resolve, 20_000));
  t.is(told('rate limited').length, 1);
  t.is(told('memory high').length, 1);
});
