import test from 'ava';
import type { ExecutionContext } from 'ava';
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { V1Pod } from '@kubernetes/client-node';
import { createKubernetesDriver } from '../../src/runtime/kubernetes/kube-driver.js';
import { BOT_LABEL } from '../../src/runtime/labels.js';
import { TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { adminKubeConfig, clusterHarness } from './cluster-harness.js';

// docs/api.md §4 rule 4 on the real cluster: an address names a bot only when exactly one running pod,
// not being deleted and not on the host's network, holds it.
function botPod(id: string, options: { hostNetwork?: boolean; graceS?: number } = {}): V1Pod {
  return {
    metadata: { name: id.replaceAll('_', '-').toLowerCase(), labels: { [BOT_LABEL]: id } },
    spec: {
      hostNetwork: options.hostNetwork,
      terminationGracePeriodSeconds: options.graceS ?? 1,
      // A bot that does not stop on TERM stays terminating, its address still held, for its grace period.
      containers: [{ name: 'bot', image: TEST_IMAGE, imagePullPolicy: 'Never', command: ['sh', '-c', "trap '' TERM; while :; do sleep 1; done"] }],
    },
  };
}

/** A namespace of its own on the real cluster, the real driver in it, and the admin's client; all closed after the test. */
async function onCluster(t: ExecutionContext) {
  const { harness, namespace, agentConfig } = await clusterHarness();
  const driver = createKubernetesDriver({ kubeConfig: agentConfig, namespace });
  t.teardown(async () => {
    await driver.close();
    await harness.close();
  });
  return { harness, namespace, driver, core: adminKubeConfig().makeApiClient(CoreV1Api) };
}

test('a terminating pod and a pod on the host network name no bot; a running one does', async (t) => {
  const { harness, namespace, driver, core } = await onCluster(t);
  const addressOf = async (name: string) => {
    let ip: string | undefined;
    const ran = await eventually(async () => {
      const pod = await core.readNamespacedPod({ name, namespace });
      ip = pod.status?.phase === 'Running' ? pod.status.podIP : undefined;
      return ip !== undefined;
    }, 60_000, 250);
    if (!ran || !ip) throw new Error(`pod ${name} never ran`);
    return ip;
  };

  const onHost = harness.newBotId();
  const leaving = harness.newBotId();
  await core.createNamespacedPod({ namespace, body: botPod(onHost, { hostNetwork: true }) });
  await core.createNamespacedPod({ namespace, body: botPod(leaving, { graceS: 60 }) });
  const hostAddress = await addressOf(botPod(onHost).metadata?.name ?? '');
  const leavingAddress = await addressOf(botPod(leaving).metadata?.name ?? '');
  // Seen by the agent: the pod made after the host-network one is known by its address.
  t.true(await eventually(async () => (await driver.botAtAddress(leavingAddress)) === leaving, 20_000, 100), 'a running bot pod names its bot');
  // Before, the first running pod with the address was taken: any caller on the node was this bot.
  t.is(await driver.botAtAddress(hostAddress), undefined, 'the node\'s address names no bot');

  await core.deleteNamespacedPod({ name: botPod(leaving).metadata?.name ?? '', namespace });
  // It keeps running, and its address, for up to 60 s; it is no bot's from the moment it is being deleted.
  t.true(await eventually(async () => (await driver.botAtAddress(leavingAddress)) === undefined, 10_000, 100), 'a terminating pod names no bot');
  const pod = await core.readNamespacedPod({ name: botPod(leaving).metadata?.name ?? '', namespace });
  t.truthy(pod.metadata?.deletionTimestamp);
  t.is(pod.status?.phase, 'Running', 'still running while the agent already refuses it');
});

test("an address no pod holds waits for the watch only while a bot's pod has no address yet", async (t) => {
  const { harness, namespace, driver, core } = await onCluster(t);
  // Every bot pod's address is known (there are none): a stranger is no bot at once, not after the 2 s a new pod gets.
  t.true(await eventually(async () => (await driver.ping().then(() => true, () => false)), 10_000, 100), 'the watches synced');
  const stranger = await Promise.race([
    driver.botAtAddress('10.88.250.250').then((botId) => ({ botId })),
    new Promise<'waited'>((resolve) => setTimeout(() => resolve('waited'), 1_500)),
  ]);
  t.deepEqual(stranger, { botId: undefined }, 'a stranger waited for a pod none was starting');

  // A bot's pod placed on a node whose kubelet has not reported its address (no such node here: none will).
  const id = harness.newBotId();
  const name = botPod(id).metadata?.name ?? '';
  await core.createNamespacedPod({ namespace, body: { ...botPod(id), spec: { ...botPod(id).spec!, nodeName: 'node-not-reporting' } } });
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  // Its first call comes before its address is reported, which it then is, as a kubelet would.
  const asked = driver.botAtAddress('10.88.250.7');
  await new Promise((resolve) => setTimeout(resolve, 300));
  await core.patchNamespacedPodStatus(
    { name, namespace, body: { status: { phase: 'Running', podIP: '10.88.250.7', podIPs: [{ ip: '10.88.250.7' }] } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  t.is(await asked, id, 'the call waited for the watch to learn the address, and is the bot');
  await core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0 }).catch(() => undefined);
});
