import { once } from 'node:events';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { createKubernetesDriver } from '../../src/runtime/kubernetes/kube-driver.js';
import type { BotOptions, HarnessBot, RuntimeHarness } from '../behaviours/runtime-harness.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { chartGrants } from '../helpers/helm.js';
import { call } from '../helpers/http-client.js';
import { FakeKubeApi } from '../helpers/kube/fake-kube-api.js';
import type { Grants } from '../helpers/kube/rbac.js';

export const NAMESPACE = 'bots';
let harnesses = 0;

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

/**
 * The Kubernetes runtime: the test API server with the RBAC of the chart's
 * Role, and the agent over the real driver through client-node. Pods get
 * loopback addresses of their own, so that a test can call as a bot.
 */
export async function kubeHarness(grants?: Grants): Promise<{ harness: RuntimeHarness; api: FakeKubeApi }> {
  const api = new FakeKubeApi(NAMESPACE, grants ?? (await chartGrants(NAMESPACE)));
  await api.start();
  const agents: TestAgent[] = [];
  const agentOver = async (kubeConfig: KubeConfig, restartTimeoutMs = 60_000): Promise<TestAgent> => {
    const agent = await startAgent(createKubernetesDriver({ kubeConfig, namespace: NAMESPACE }), { restartTimeoutMs });
    agents.push(agent);
    return agent;
  };
  const main = await agentOver(api.kubeConfig());
  const prefix = `127.${100 + (process.pid % 100)}.${harnesses++ % 256}`;
  const addresses = new Map<string, string>();
  let bots = 0;
  const newBotId = () => `bot_${process.pid}_${++bots}_kube`;

  const harness: RuntimeHarness = {
    name: 'kubernetes',
    agent: main.server,
    async createBot(options: BotOptions = {}): Promise<HarnessBot> {
      const id = newBotId();
      const podIP = `${prefix}.${bots + 1}`;
      addresses.set(id, podIP);
      api.addBot({
        id,
        podIP,
        owner: options.owner,
        replicas: options.running === false ? 0 : 1,
        logLines: options.logLines,
        startDelayMs: options.slowRestartMs,
        labelled: options.labelled,
      });
      return { id };
    },
    newBotId,
    running: async (bot) => api.replicas(bot.id) > 0 && api.livePods(bot.id).some((pod) => pod.status.phase === 'Running'),
    runId: async (bot) => api.livePods(bot.id).find((pod) => pod.status.phase === 'Running')?.metadata.name ?? 'none',
    restartCount: async (bot) => api.rollouts(bot.id),
    async callFromBot(bot, request) {
      const reply = await call(main.server, request.path, { ...request, from: addresses.get(bot.id) });
      return { status: reply.status, body: reply.body, raw: reply.text };
    },
    agentWithRestartTimeout: async (ms) => (await agentOver(api.kubeConfig(), ms)).server,
    unreachableAgent: async () => (await agentOver(await unreachableKubeConfig())).server,
    async close() {
      await Promise.all(agents.map((agent) => agent.close()));
      await api.stop();
    },
  };
  return { harness, api };
}
