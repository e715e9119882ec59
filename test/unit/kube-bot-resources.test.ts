import test from 'ava';
import { BOT_EPHEMERAL_STORAGE, botResources } from '../../src/runtime/kubernetes/kube-provisioner.js';

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
