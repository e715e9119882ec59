// The Kubernetes section of npm run bench: the agent on the real single-node
// cluster (npm run kube:up), counting the requests it makes of the API server
// per call once warm. The goal is none for an identity, a status or stats.
import { execFileSync } from 'node:child_process';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { AddressInfo } from 'node:net';
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import { createKubernetesDriver } from '../src/runtime/kubernetes/kube-driver.js';
import { BOT_LABEL } from '../src/runtime/labels.js';
import { startAgent } from '../test/helpers/agent.js';
import { availabilityOnCluster } from './bench-ha.js';
import type { Availability } from './bench-ha.js';
import { adminKubeConfig, botDeployment, clusterHarness } from '../test/kube-cluster/cluster-harness.js';

const BOTS = 5;
const CALLS = 200;

export interface KubeCallCost {
  call: string;
  /** API server requests per call, watches left out. */
  requestsPerCall: number;
  p50Ms: number;
}

/** Counts the requests this process makes of `origin` while `work` runs (client-node sends every one through undici). */
async function requestsDuring(origin: string, work: () => Promise<void>): Promise<number> {
  let count = 0;
  const onRequest = (message: unknown): void => {
    const { request } = message as { request: { origin: string; path: string } };
    if (request.origin === origin && !request.path.includes('watch=true')) count += 1;
  };
  subscribe('undici:request:create', onRequest);
  try {
    await work();
  } finally {
    unsubscribe('undici:request:create', onRequest);
  }
  return count;
}

async function cost(call: string, origin: string, once: () => Promise<unknown>): Promise<KubeCallCost> {
  await once(); // warm
  const times: number[] = [];
  const requests = await requestsDuring(origin, async () => {
    for (let i = 0; i < CALLS; i++) {
      const start = process.hrtime.bigint();
      await once();
      times.push(Number(process.hrtime.bigint() - start) / 1e6);
    }
  });
  times.sort((a, b) => a - b);
  return { call, requestsPerCall: Number((requests / CALLS).toFixed(3)), p50Ms: Number((times[Math.floor(times.length / 2)] ?? NaN).toFixed(2)) };
}

/** Whether the local cluster's API server is running (its pid file names a live kube-apiserver). */
export function clusterRunning(): boolean {
  try {
    execFileSync('bash', ['-c', 'source scripts/kube/layout.sh && daemon_pid kube-apiserver'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * Brings the cluster up (built once, then cached), runs BOTS bots on it and measures; removes its namespace,
 * and takes the cluster down again when it was not running before (its daemons would weigh on a next run).
 */
export async function kubernetesCosts(): Promise<{ costs: KubeCallCost[]; availability: Availability[] }> {
  const wasRunning = clusterRunning();
  try {
    const costs = await measureOnCluster();
    return { costs, availability: await availabilityOnCluster() };
  } finally {
    if (!wasRunning) execFileSync('bash', ['scripts/kube/down.sh'], { stdio: 'ignore' });
  }
}

async function measureOnCluster(): Promise<KubeCallCost[]> {
  const up = execFileSync('bash', ['scripts/kube/up.sh'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  process.env.BOT_AGENT_KUBECONFIG = up.trim().split('\n').at(-1);
  const { harness, namespace, agentConfig } = await clusterHarness();
  const agent = await startAgent(createKubernetesDriver({ kubeConfig: agentConfig, namespace }), { readRate: 100_000 });
  try {
    const admin = adminKubeConfig();
    const ids = Array.from({ length: BOTS }, () => harness.newBotId());
    await Promise.all(ids.map((id) => admin.makeApiClient(AppsV1Api).createNamespacedDeployment({ namespace, body: botDeployment(id) })));
    const core = admin.makeApiClient(CoreV1Api);
    const bot = ids[0]!;
    const { port } = agent.server.address() as AddressInfo;
    const base = `http://127.0.0.1:${port}`;
    // Stats answer once metrics-server has scraped the pod twice (15 s apart).
    const deadline = Date.now() + 120_000;
    while (!(await fetch(`${base}/api/bots/${bot}/stats`)).ok) {
      if (Date.now() > deadline) throw new Error(`no stats for ${bot} within 120 s`);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
    const [pod] = (await core.listNamespacedPod({ namespace, labelSelector: `${BOT_LABEL}=${bot}` })).items;
    const address = pod?.status?.podIP ?? '';
    const origin = new URL(agentConfig.getCurrentCluster()?.server ?? '').origin;
    const driver = createKubernetesDriver({ kubeConfig: agentConfig, namespace });
    try {
      // The driver's own watches open before it is asked.
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      return [
        await cost('identity of a bot (its pod IP)', origin, async () => {
          if ((await driver.botAtAddress(address)) !== bot) throw new Error(`${address} is not identified as ${bot}`);
        }),
        await cost('GET /api/bots/{id}/stats', origin, () => fetch(`${base}/api/bots/${bot}/stats`).then((r) => r.arrayBuffer())),
        await cost('GET /api/bots/{id} (status)', origin, () => fetch(`${base}/api/bots/${bot}`).then((r) => r.arrayBuffer())),
        await cost('POST /api/bots/logs (lines 100)', origin, () =>
          fetch(`${base}/api/bots/logs`, { method: 'POST', body: JSON.stringify({ bot_id: bot, lines: 100 }), headers: { 'content-type': 'application/json' } }).then((r) => r.arrayBuffer()),
        ),
      ];
    } finally {
      await driver.close();
    }
  } finally {
    await agent.close();
    await harness.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const costs = await kubernetesCosts();
  process.stdout.write(`${JSON.stringify(costs, null, 2)}\n`);
  process.exit(0);
}
