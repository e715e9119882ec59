import { once } from 'node:events';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';

/** The namespace of the bots in the tests against the test-only API server. */
export const NAMESPACE = 'bots';

/** A kubeconfig whose API server refuses connections: a port that was free a moment ago. */
export async function unreachableKubeConfig(): Promise<KubeConfig> {
  const probe = createServer().listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  const config = new KubeConfig();
  config.loadFromOptions({
    clusters: [{ name: 'gone', server: `https://127.0.0.1:${port}`, skipTLSVerify: false }],
    users: [{ name: 'agent', token: 'x' }],
    contexts: [{ name: 'gone', cluster: 'gone', user: 'agent' }],
    currentContext: 'gone',
  });
  return config;
}
