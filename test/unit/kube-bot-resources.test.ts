import test from 'ava';
import { BOT_EPHEMERAL_STORAGE, botResources } from '../../src/runtime/kubernetes/kube-provisioner.js';
import type { V1Pod } from '@kubernetes/client-node';
import { podLimits } from '../../src/runtime/kubernetes/kube-stats.js';

// A provisioned bot on Kubernetes never runs unbounded on its node's disk, and is never scheduled as free.
test('a bot without limits gets default requests and a bound on the node disk', (t) => {
  t.deepEqual(botResources({ memoryLimitBytes: undefined, cpuLimit: undefined }), {
    requests: { cpu: '50m', memory: String(64 * 1024 * 1024), 'ephemeral-storage': '64Mi' },
    limits: { 'ephemeral-storage': BOT_EPHEMERAL_STORAGE },
  });
});

test("the platform's limits are kept, and requests never exceed them", (t) => {
  t.deepEqual(botResources({ memoryLimitBytes: 16 * 1024 * 1024, cpuLimit: 0.02 }), {
    requests: { cpu: '20m', memory: String(16 * 1024 * 1024), 'ephemeral-storage': '64Mi' },
    limits: { 'ephemeral-storage': BOT_EPHEMERAL_STORAGE, memory: String(16 * 1024 * 1024), cpu: '20m' },
  });
  t.like(botResources({ memoryLimitBytes: 512 * 1024 * 1024, cpuLimit: 2 }), {
    requests: { cpu: '50m', memory: String(64 * 1024 * 1024) },
    limits: { cpu: '2000m', memory: String(512 * 1024 * 1024) },
  });
  t.like(botResources({ memoryLimitBytes: undefined, cpuLimit: 0.0001 }), { requests: { cpu: '1m' }, limits: { cpu: '1m' } }, 'never a limit of 0m');
});

test("a pod's limits are taken each apart: a memory limit alone still counts, the CPU then the node's", (t) => {
  const pod = (limits: Record<string, string> | undefined) => ({ spec: { containers: [{ name: 'bot', resources: limits === undefined ? {} : { limits } }] } }) as V1Pod;
  t.deepEqual(podLimits(pod({ memory: '64Mi' })), { memoryBytes: 64 * 1024 * 1024 });
  t.deepEqual(podLimits(pod({ cpu: '500m', memory: '64Mi' })), { cpuCores: 0.5, memoryBytes: 64 * 1024 * 1024 });
  t.deepEqual(podLimits(pod(undefined)), {});
});
