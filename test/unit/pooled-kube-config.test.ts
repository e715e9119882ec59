import test from 'ava';
import { HttpMethod, KubeConfig, RequestContext } from '@kubernetes/client-node';
import { PooledKubeConfig } from '../../src/runtime/kubernetes/kube-connection.js';

// Which connections a call to the API server goes over (docs/performance.md, "Connections to the API server").
// The real cluster's test (test/kube-cluster/faults.test.ts) counts them; this one names the pools.
function configOf(made: KubeConfig): KubeConfig {
  made.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:6443', caData: Buffer.from('a CA').toString('base64'), skipTLSVerify: false }],
    users: [{ name: 'u', token: 'a-token' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return made;
}

/** The Authorization header of every request authenticated so far. */
const authorizations: string[] = [];

async function dispatcherOf(config: KubeConfig, url: string) {
  const context = new RequestContext(url, HttpMethod.GET);
  await config.applySecurityAuthentication(context);
  authorizations.push(context.getHeaders().Authorization ?? '');
  return context.getDispatcher();
}

test('quick calls share one pool, watches and followed logs another; client-node alone gives every call its own', async (t) => {
  const pooled = configOf(new PooledKubeConfig());
  const base = 'https://127.0.0.1:6443/api/v1/namespaces/bots/pods';
  const quick = await Promise.all([dispatcherOf(pooled, base), dispatcherOf(pooled, `${base}/p/log?container=bot&tailLines=100`), dispatcherOf(pooled, base)]);
  t.truthy(quick[0]);
  t.is(quick[1], quick[0]);
  t.is(quick[2], quick[0]);
  const watch = await dispatcherOf(pooled, `${base}?labelSelector=x&watch=true&resourceVersion=5`);
  const follow = await dispatcherOf(pooled, `${base}/p/log?follow=true&container=bot`);
  t.not(watch, quick[0]);
  t.is(follow, watch);
  // The token is still set on every call by client-node (it may rotate).
  t.deepEqual([...new Set(authorizations)], ['Bearer a-token']);

  const plain = configOf(new KubeConfig());
  t.not(await dispatcherOf(plain, base), await dispatcherOf(plain, base));

  const copied = PooledKubeConfig.of(plain);
  t.is(await dispatcherOf(copied, base), await dispatcherOf(copied, base));
  t.is(copied.getCurrentCluster()?.server, 'https://127.0.0.1:6443');
});
