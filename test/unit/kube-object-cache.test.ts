import { setFlagsFromString } from 'node:v8';
import test from 'ava';
import type { V1Pod } from '@kubernetes/client-node';
import { podHealth } from '../../src/runtime/kubernetes/kube-health.js';
import { dropUnreadOfPod } from '../../src/runtime/kubernetes/kube-object-cache.js';
import { podLimits } from '../../src/runtime/kubernetes/kube-stats.js';

// A bot's pod as the API server sends it (the chart's provisioning, a probed bot; docs/performance.md, "Kubernetes
// at 5,000 bots"): the watch keeps 5,000 of them, so what the agent never reads of one is dropped as it comes in.
const started = '2026-11-29T03:00:00Z';
const botPod = (): V1Pod => ({
  metadata: {
    name: 'bot-a-7f9c-x2',
    uid: 'uid-1',
    labels: { 'bot-agent/bot-id': 'bot_a' },
    annotations: { 'kubectl.kubernetes.io/default-container': 'bot' },
    ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'bot-a-7f9c', uid: 'uid-0', controller: true }],
    managedFields: [{ manager: 'kube-controller-manager', operation: 'Update', fieldsType: 'FieldsV1', fieldsV1: {} }],
  },
  spec: {
    nodeName: 'node-1',
    containers: [
      {
        name: 'bot',
        image: 'bot:1',
        command: ['sh', '-c', 'exec bot'],
        args: ['--verbose'],
        env: [{ name: 'BOT_TOKEN', value: 'a-secret-the-agent-never-reads' }],
        envFrom: [{ secretRef: { name: 'bot-a-env' } }],
        volumeMounts: [{ name: 'kube-api-access-26rq9', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true }],
        resources: { limits: { cpu: '500m', memory: '256Mi' } },
        livenessProbe: { exec: { command: ['true'] }, periodSeconds: 5 },
        readinessProbe: { exec: { command: ['true'] }, periodSeconds: 5 },
      },
    ],
    volumes: [{ name: 'kube-api-access-26rq9', projected: { sources: [{ serviceAccountToken: { path: 'token', expirationSeconds: 3607 } }] } }],
    tolerations: [{ key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 }],
  },
  status: {
    phase: 'Running',
    podIP: '10.88.0.7',
    startTime: new Date(started),
    conditions: [{ type: 'ContainersReady', status: 'False', lastTransitionTime: new Date('2026-11-29T03:00:40Z') }],
    containerStatuses: [{ name: 'bot', image: 'bot:1', imageID: 'sha256:ab', ready: false, restartCount: 2, state: { running: { startedAt: new Date(started) } } }],
  },
});

test("a watched pod keeps what the agent reads of it and drops what only the kubelet reads", (t) => {
  const pod = botPod();
  dropUnreadOfPod(pod);
  const container = pod.spec!.containers[0]!;
  t.deepEqual(definedKeys(container), ['image', 'livenessProbe', 'name', 'readinessProbe', 'resources']);
  t.is(pod.spec!.volumes, undefined);
  t.is(pod.spec!.tolerations, undefined);
  t.is(pod.metadata!.ownerReferences, undefined);
  t.is(pod.metadata!.managedFields, undefined);
  t.false(JSON.stringify(pod).includes('a-secret-the-agent-never-reads'));
  const whole = botPod();
  t.deepEqual(pod.metadata!.labels, whole.metadata!.labels);
  t.deepEqual(pod.metadata!.annotations, whole.metadata!.annotations);
  t.deepEqual(pod.status, whole.status);
  t.is(pod.spec!.nodeName, 'node-1');
  // What the status, the watchdog and the stats work out of a pod is the same either way.
  const now = Date.parse('2026-11-29T03:05:00Z');
  t.deepEqual(podHealth(pod, 'bot', Date.parse(started), now), podHealth(whole, 'bot', Date.parse(started), now));
  t.is(podHealth(pod, 'bot', Date.parse(started), now).status, 'unhealthy');
  t.deepEqual(podLimits(pod), podLimits(whole));
  t.not(podLimits(pod).memoryBytes, undefined);
});

test('a pod without a spec, or with init containers, is taken as it is', (t) => {
  const bare: V1Pod = { metadata: { name: 'p' } };
  dropUnreadOfPod(bare);
  t.deepEqual(bare, { metadata: { name: 'p' } });
  const withInit = botPod();
  withInit.spec!.initContainers = [{ name: 'init', image: 'init:1', env: [{ name: 'A', value: 'b' }], command: ['x'] }];
  dropUnreadOfPod(withInit);
  t.deepEqual(JSON.parse(JSON.stringify(withInit.spec!.initContainers)), [{ name: 'init', image: 'init:1' }]);
});

// V8's own word on an object's layout (its natives, allowed before the check below is compiled).
setFlagsFromString('--allow-natives-syntax');
const hasFastProperties = new Function('object', 'return %HasFastProperties(object)') as (object: object) => boolean;

test("what is dropped of a watched pod leaves its objects as they were laid out: a delete makes each a dictionary, larger than what it dropped", (t) => {
  // As a watch event's pod comes: parsed from JSON.
  const pod = JSON.parse(JSON.stringify(botPod())) as V1Pod;
  const objects = { metadata: pod.metadata!, spec: pod.spec!, container: pod.spec!.containers[0]! };
  for (const object of Object.values(objects)) t.true(hasFastProperties(object), 'as parsed');
  dropUnreadOfPod(pod);
  for (const [name, object] of Object.entries(objects)) t.true(hasFastProperties(object), `${name} after the drop`);
  t.false(JSON.stringify(pod).includes('a-secret-the-agent-never-reads'));
});

function definedKeys(object: object): string[] {
  return Object.entries(object).flatMap(([key, value]) => (value === undefined ? [] : [key])).sort();
}
