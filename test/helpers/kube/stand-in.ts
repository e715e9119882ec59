import { once } from 'node:events';
import { createServer } from 'node:http';
import type { RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ExecutionContext } from 'ava';
import { KubeConfig } from '@kubernetes/client-node';

/**
 * A stand-in of the API server for what the real cluster cannot show (its answers the test's `handle`), on loopback
 * for the test's length, and a KubeConfig that reaches it as user `agent`.
 */
export async function standInApi(t: ExecutionContext, handle: RequestListener): Promise<KubeConfig> {
  const server = createServer(handle);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  const config = new KubeConfig();
  config.loadFromOptions({
    clusters: [{ name: 'c', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'agent' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return config;
}
