import test from 'ava';
import { ApiException } from '@kubernetes/client-node';
import type { KubeConfig, V1Lease } from '@kubernetes/client-node';
import { LeaseLocks } from '../../src/runtime/kubernetes/kube-leases.js';

/** The API server's Leases as far as the locks use them: versions, and preconditions on replace and delete. */
function leaseServer(replaceDelayMs: () => number) {
  const leases = new Map<string, V1Lease>();
  let version = 0;
  const conflict = () => new ApiException(409, 'Conflict', {}, {});
  const stored = (lease: V1Lease): V1Lease => {
    const kept = { ...lease, metadata: { ...lease.metadata, resourceVersion: String((version += 1)) } };
    leases.set(lease.metadata!.name!, kept);
    return kept;
  };
  const api = {
    createNamespacedLease: async ({ body }: { body: V1Lease }) => {
      if (leases.has(body.metadata!.name!)) throw conflict();
      return stored(body);
    },
    readNamespacedLease: async ({ name }: { name: string }) => {
      const lease = leases.get(name);
      if (!lease) throw new ApiException(404, 'Not Found', {}, {});
      return lease;
    },
    // Written at once, answered late: as a slow API server (or network) does.
    replaceNamespacedLease: async ({ name, body }: { name: string; body: V1Lease }) => {
      const ok = leases.get(name)?.metadata?.resourceVersion === body.metadata?.resourceVersion;
      const written = ok ? stored(body) : undefined;
      await new Promise((resolve) => setTimeout(resolve, replaceDelayMs()));
      if (!written) throw conflict();
      return written;
    },
    deleteNamespacedLease: async ({ name, body }: { name: string; body?: { preconditions?: { resourceVersion?: string } } }) => {
      if (leases.get(name)?.metadata?.resourceVersion !== body?.preconditions?.resourceVersion) throw conflict();
      leases.delete(name);
      return {};
    },
  };
  return { leases, kubeConfig: { makeApiClient: () => api } as unknown as KubeConfig };
}

// The holder deletes its Lease when its operation ends, with the version it wrote last as precondition. A
// renewal under way at that moment (a slow API server) wrote a newer one: the delete named the older, was
// refused, and the Lease was left for every other agent to wait out (seen on the real cluster under load).
test('an operation that ends while its Lease is being renewed still deletes it', async (t) => {
  const { leases, kubeConfig } = leaseServer(() => 150);
  const locks = new LeaseLocks(kubeConfig, 'bots', 'agent-a', { durationS: 15, renewMs: 100, pollMs: 20, callMs: 2_000 });
  // Ends 40 ms into the first renewal, whose answer comes 150 ms after it was asked.
  const result = await locks.hold('bot_1_1_a', 'restart', () => new Promise((resolve) => setTimeout(() => resolve('done'), 140)));
  t.is(result, 'done');
  t.deepEqual([...leases.keys()], [], 'a Lease was left behind');
});

// A renewal answered later than the next is due: the next waits for it, or it would name the version before it,
// be refused, and the holder would take its own Lease for lost (503) mid-operation.
test('a renewal slower than the renewal period: the holder keeps its Lease and finishes its operation', async (t) => {
  const { leases, kubeConfig } = leaseServer(() => 250);
  const locks = new LeaseLocks(kubeConfig, 'bots', 'agent-a', { durationS: 15, renewMs: 100, pollMs: 20, callMs: 2_000 });
  const result = await locks.hold('bot_1_1_a', 'restart', () => new Promise((resolve) => setTimeout(() => resolve('done'), 700)));
  t.is(result, 'done');
  t.deepEqual([...leases.keys()], []);
});
