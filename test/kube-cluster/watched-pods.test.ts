import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import test from 'ava';
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import type { V1Pod } from '@kubernetes/client-node';
import { dropUnreadOfPod, KubeObjectCache } from '../../src/runtime/kubernetes/kube-object-cache.js';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { adminKubeConfig, botDeployment } from './cluster-harness.js';

// The agent's watch keeps every bot pod in memory (5,000 at scale: docs/performance.md, "Kubernetes at 5,000
// bots") without what only the kubelet reads of it. Here the pods are the real API server's, one met in the
// first list and one through the watch, each followed through its updates until it runs.
const run = promisify(execFile);
const admin = adminKubeConfig();
const apps = admin.makeApiClient(AppsV1Api);
const core = admin.makeApiClient(CoreV1Api);
const namespace = `watch-${randomBytes(3).toString('hex')}`;
const TOKEN = `token-${randomBytes(8).toString('hex')}`;

test.before(async () => {
  await run('bash', ['scripts/kube/images.sh', TEST_IMAGE]);
  await core.createNamespace({ body: { metadata: { name: namespace } } });
});

test.after.always(async () => {
  await core.deleteNamespace({ name: namespace }).catch(() => undefined);
});

test('a bot pod watched on the real cluster is held without its environment, command, volumes or tolerations, whether listed or watched', async (t) => {
  const deploy = (id: string) => apps.createNamespacedDeployment({ namespace, body: botDeployment(id, { env: { BOT_TOKEN: TOKEN } }) });
  await deploy('bot_listed');
  const listedPod = () => core.listNamespacedPod({ namespace, labelSelector: `${BOT_LABEL}=bot_listed` }).then((list) => list.items[0]);
  t.true(await eventually(async () => (await listedPod()) !== undefined, 60_000, 200), 'the first pod is there before the watch begins');

  const pods = new KubeObjectCache<V1Pod>(
    admin,
    `/api/v1/namespaces/${namespace}/pods`,
    (from) => core.listNamespacedPod({ namespace, labelSelector: BOT_LABEL, _continue: from }),
    BOT_LABEL,
    { bot: (pod) => pod.metadata?.labels?.[BOT_LABEL] },
    'the test pods',
    (what, err) => t.log(what, err),
    dropUnreadOfPod,
  );
  pods.start();
  t.teardown(() => pods.close());
  await deploy('bot_watched');

  for (const id of ['bot_listed', 'bot_watched']) {
    const running = () => pods.byIndex('bot', id)?.find((pod) => pod.status?.containerStatuses?.[0]?.state?.running);
    t.true(await eventually(() => running() !== undefined, 90_000, 200), `${id} seen running through the watch`);
    const held = running()!;
    const [whole] = (await core.listNamespacedPod({ namespace, fieldSelector: `metadata.name=${held.metadata!.name}` })).items;
    // What the API server sends: the premise.
    t.true(JSON.stringify(whole).includes(TOKEN), `${id}: the API server's pod carries the token`);
    t.truthy(whole!.spec!.volumes?.length, `${id}: and a volume`);
    t.truthy(whole!.spec!.tolerations?.length, `${id}: and tolerations`);

    t.false(JSON.stringify(held).includes(TOKEN), `${id}: the held pod has no token`);
    const container = held.spec!.containers[0]!;
    t.is(container.env, undefined);
    t.is(container.command, undefined);
    t.is(container.volumeMounts, undefined);
    t.is(held.spec!.volumes, undefined);
    t.is(held.spec!.tolerations, undefined);
    t.is(held.metadata!.managedFields, undefined);
    t.is(held.metadata!.name, whole!.metadata!.name);
    t.deepEqual(held.metadata!.labels, whole!.metadata!.labels);
    t.is(container.image, whole!.spec!.containers[0]!.image);
    t.is(held.spec!.nodeName, whole!.spec!.nodeName);
    t.is(held.status?.podIP, whole!.status?.podIP);
  }
});
