import { execFile } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import test from 'ava';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import type { V1Pod } from '@kubernetes/client-node';
import { createKubernetesDriver } from '../../src/runtime/kubernetes/kube-driver.js';
import { createKubernetesProvisioner } from '../../src/runtime/kubernetes/kube-provisioner.js';
import { ServiceAccountTokens } from '../../src/runtime/kubernetes/kube-token-review.js';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { asPlatform, startAgent, TEST_ADMIN_TOKEN } from '../helpers/agent.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { CRASH_CODE, PYTEST_SCRIPT, PYTHON_BOT_SCRIPT, pythonBotImage, pytestSummary } from '../helpers/python-bot.js';
import { adminKubeConfig, clusterHarness, HOST_ADDRESS } from './cluster-harness.js';
import { execInPod } from './pod-exec.js';

const run = promisify(execFile);

// The Python client (clients/python) from inside a pod on the real cluster: pytest runs in a bot the
// agent created, which names itself by its projected ServiceAccount token alone (AGENT_IDENTITY=token).
test('the Python client, run by pytest inside a bot pod, does everything it offers against the real agent', async (t) => {
  const image = await pythonBotImage();
  await run('bash', ['scripts/kube/images.sh', image]);
  const { harness, namespace, agentConfig } = await clusterHarness({ 'identity.mode': 'token' });
  const agent = await startAgent(
    createKubernetesDriver({ kubeConfig: agentConfig, namespace }),
    { identity: 'token', botTokens: new ServiceAccountTokens(agentConfig, namespace), adminToken: TEST_ADMIN_TOKEN },
    '0.0.0.0',
    createKubernetesProvisioner({ kubeConfig: agentConfig, namespace, agentUrl: 'http://agent:8000' }),
  );
  t.teardown(async () => {
    await agent.close();
    await harness.close();
  });
  const id = harness.newBotId();
  const created = await call(agent.server, '/api/admin/bots', {
    headers: asPlatform,
    body: { bot_id: id, user_id: 'user_py', image, template: 'discord', token: 'discord-secret-0123456789', command: ['sh', '-c', PYTHON_BOT_SCRIPT] },
  });
  t.is(created.status, 201, created.text);
  const admin = adminKubeConfig();
  const core = admin.makeApiClient(CoreV1Api);
  const runningPod = async (): Promise<V1Pod | undefined> =>
    (await core.listNamespacedPod({ namespace, labelSelector: `${BOT_LABEL}=${id}` })).items.find(
      (pod) => pod.status?.phase === 'Running' && !pod.metadata?.deletionTimestamp && pod.status.containerStatuses?.[0]?.state?.running,
    );
  const restartsOf = (pod: V1Pod | undefined) => pod?.status?.containerStatuses?.[0]?.restartCount ?? 0;
  let pod = (await eventually(async () => (await runningPod()) !== undefined, 90_000, 250)) ? await runningPod() : undefined;
  if (!pod) throw new Error(`bot ${id} never ran`);
  const name = pod.metadata?.name ?? '';

  // A crash first (the kubelet restarts the container): the tests find its exit record and its event.
  await execInPod(admin, namespace, name, ['sh', '-c', 'kill -USR1 1']);
  t.true(await eventually(async () => restartsOf(await runningPod()) === 1, 60_000, 250), 'the crash was not restarted');
  // Stats need metrics-server to have scraped the pod twice.
  const metrics = admin.makeApiClient(CustomObjectsApi);
  const scraped = () =>
    metrics.getNamespacedCustomObject({ group: 'metrics.k8s.io', version: 'v1beta1', namespace, plural: 'pods', name }).then(() => true, () => false);
  t.true(await eventually(scraped, 90_000, 1_000), 'metrics-server never reported the pod');

  const { port } = agent.server.address() as AddressInfo;
  const env = ['env', `BOT_AGENT_PROBE=${HOST_ADDRESS}:${port}`, `BOT_AGENT_TEST_EXIT_CODE=${CRASH_CODE}`];
  const output = await execInPod(admin, namespace, name, [...env, 'sh', '-c', PYTEST_SCRIPT]);
  const summary = pytestSummary(output);
  console.log(`pytest inside a bot pod (Kubernetes):\n${output.trim().split('\n').slice(-25).join('\n')}`);
  t.true(summary.clean, output);
  t.true(summary.passed >= 19, summary.line);
  // Its last test restarted the bot from inside: a new pod.
  t.true(
    await eventually(async () => {
      pod = await runningPod();
      return pod !== undefined && pod.metadata?.name !== name;
    }, 90_000, 250),
    'the restart never replaced the pod',
  );
});
