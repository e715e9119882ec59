import test from 'ava';
import { createKubernetesDriver } from '../../src/runtime/kubernetes/kube-driver.js';
import { startAgent } from '../helpers/agent.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { SocketProxy } from '../helpers/socket-proxy.js';
import { clusterHarness, HOST_ADDRESS, reachedAt } from './cluster-harness.js';

// The real API server behind a proxy the test can cut off or stall: every call
// is a 503 (each API call has a 1.5 s deadline), and once the API server answers
// again the agent recovers by itself, without a restart.
test('an API server cut off, then hung, is a 503 on every call; the agent recovers by itself each time', async (t) => {
  const { harness, namespace, agentConfig } = await clusterHarness();
  const proxy = new SocketProxy({ host: HOST_ADDRESS, port: 6443 });
  await proxy.start();
  const agent = await startAgent(createKubernetesDriver({ kubeConfig: reachedAt(agentConfig, `https://127.0.0.1:${proxy.port}`), namespace }));
  t.teardown(async () => {
    await agent.close();
    await proxy.close();
    await harness.close();
  });
  const bot = await harness.createBot({ logLines: ['hi'] });
  const logs = () => call(agent.server, '/api/bots/logs', { body: { bot_id: bot.id }, signal: AbortSignal.timeout(30_000) });
  t.like(await logs(), { status: 200, body: { logs: 'hi\n' } });

  for (const fault of ['cut', 'stall'] as const) {
    proxy[fault]();
    for (const [path, body] of [
      ['/readyz', undefined],
      ['/api/bots/logs', { bot_id: bot.id }],
      ['/api/bots/restart', { bot_id: bot.id, user_id: 'user_1' }],
    ] as const) {
      const started = Date.now();
      const reply = await call(agent.server, path, { body, signal: AbortSignal.timeout(30_000) });
      t.is(reply.status, 503, `${fault} ${path}`);
      t.regex(String(reply.body?.msg), /runtime unavailable/);
      // 1.5 s deadlines; ten seconds only tells an answer from a hang.
      t.true(Date.now() - started < 10_000, `${fault} ${path} took ${Date.now() - started} ms`);
    }
    proxy.restore();
    t.true(await eventually(async () => (await call(agent.server, '/readyz')).status === 200, 20_000, 200), `not ready again after ${fault}`);
    t.like(await logs(), { status: 200, body: { logs: 'hi\n' } });
  }
  t.is(await harness.restartCount(bot), 0, 'a restart went through while the API server was away');
});
