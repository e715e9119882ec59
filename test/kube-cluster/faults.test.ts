import test from 'ava';
import { QUICK_API_CONNECTIONS } from '../../src/runtime/kubernetes/kube-connection.js';
import { createKubernetesDriver } from '../../src/runtime/kubernetes/kube-driver.js';
import { startAgent } from '../helpers/agent.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { SocketProxy } from '../helpers/socket-proxy.js';
import { clusterHarness, HOST_ADDRESS, reachedAt } from './cluster-harness.js';

// The real API server behind a proxy the test can cut off or stall: every call
// is a 503 (each API call has a 1.5 s deadline), and once the API server answers
// again the agent recovers by itself, without a restart.
/** An agent of its own reaching the real API server through a proxy the test holds, and a bot that printed `hi`. */
async function behindProxy(t: { teardown(fn: () => Promise<void>): void }) {
  const { harness, namespace, agentConfig } = await clusterHarness();
  const proxy = new SocketProxy({ host: HOST_ADDRESS, port: 6443 });
  await proxy.start();
  const agent = await startAgent(createKubernetesDriver({ kubeConfig: reachedAt(agentConfig, `https://127.0.0.1:${proxy.port}`), namespace }));
  t.teardown(async () => {
    await agent.close();
    await proxy.close();
    await harness.close();
  });
  return { harness, proxy, agent, bot: await harness.createBot({ logLines: ['hi'] }) };
}

test('an API server cut off, then hung, is a 503 on every call; the agent recovers by itself each time', async (t) => {
  const { harness, proxy, agent, bot } = await behindProxy(t);
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

// client-node alone makes a dispatcher, so a TLS connection, for every call: the agent's calls share kept ones
// (docs/performance.md, "Connections to the API server").
test(`calls to the API server share kept connections: reads one after another open none, and however many come at once use at most ${QUICK_API_CONNECTIONS}`, async (t) => {
  const { proxy, agent, bot } = await behindProxy(t);
  // Each logs read is a call to the API server (pods/log); nothing else of this agent's goes there but its watches.
  const logs = () => call(agent.server, '/api/bots/logs', { body: { bot_id: bot.id }, signal: AbortSignal.timeout(30_000) });
  t.like(await logs(), { status: 200, body: { logs: 'hi\n' } });
  const before = proxy.connectionsAccepted;
  // The proxy sees TLS only; that a read is a call of its own is docs/performance.md's (the logs are read afresh each time).
  for (let i = 0; i < 40; i += 1) t.is((await logs()).status, 200);
  const opened = proxy.connectionsAccepted - before;
  t.true(opened <= 1, `40 reads one after another opened ${opened} connections`);

  proxy.peakConnections = 0;
  const replies = await Promise.all(Array.from({ length: 60 }, logs));
  t.deepEqual(replies.filter((reply) => reply.status !== 200).map((reply) => reply.text), []);
  // Beside the quick calls' connections: the watches of Deployments and pods, each on its own.
  t.true(proxy.peakConnections <= QUICK_API_CONNECTIONS + 2, `${proxy.peakConnections} connections at once for 60 reads at once`);
});
