import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { AppsV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, KubernetesObjectApi, PatchStrategy } from '@kubernetes/client-node';
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import { PooledKubeConfig } from '../../src/runtime/kubernetes/kube-connection.js';
import { createKubernetesDriver } from '../../src/runtime/kubernetes/kube-driver.js';
import { objectName } from '../../src/runtime/kubernetes/kube-names.js';
import { BOT_LABEL, OWNER_LABEL } from '../../src/runtime/labels.js';
import { PACED_BOT, STUBBORN_BOT, TALKING_BOT } from '../behaviours/bot-scripts.js';
import type { BotOptions, HarnessBot, RuntimeHarness } from '../behaviours/runtime-harness.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent, TestAgentOptions } from '../helpers/agent.js';
import { TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { renderChart } from '../helpers/helm.js';
import { unreachableKubeConfig } from '../kube/kube-harness.js';
import { httpFromPod } from './pod-exec.js';

const run = promisify(execFile);
/** The API server's address on the pods' bridge, where pods also reach an agent the test runs. */
export const HOST_ADDRESS = '10.88.0.1';
/** The label that selects a test bot's pods, labelled as a bot or not. */
const TEST_NAME_LABEL = 'bot-agent-test/name';
const RBAC_KINDS = new Set(['ServiceAccount', 'Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding']);

/** The admin kubeconfig `npm run kube:up` printed (npm test passes it as BOT_AGENT_KUBECONFIG). */
export function adminKubeConfig(): KubeConfig {
  const path = process.env.BOT_AGENT_KUBECONFIG;
  if (!path) throw new Error('no cluster: BOT_AGENT_KUBECONFIG is unset; npm test brings one up with npm run kube:up');
  const config = new KubeConfig();
  config.loadFromFile(path);
  return config;
}

/**
 * The agent's own credentials: the chart's ServiceAccount, Role and ClusterRole
 * (rendered with `values`) applied in `namespace` through the real API server, and a token for that
 * account, so that the real RBAC judges every call the agent makes.
 */
export async function agentKubeConfig(admin: KubeConfig, namespace: string, values: Record<string, string> = {}): Promise<KubeConfig> {
  const objects = await renderChart(namespace, values);
  const apply = KubernetesObjectApi.makeApiClient(admin);
  await apply.patch({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } }, undefined, undefined, 'bot-agent-tests', true, PatchStrategy.ServerSideApply);
  for (const object of objects.filter((o) => RBAC_KINDS.has(o.kind))) {
    await apply.patch(object as never, undefined, undefined, 'bot-agent-tests', true, PatchStrategy.ServerSideApply);
  }
  const account = objects.find((o) => o.kind === 'ServiceAccount')?.metadata.name ?? '';
  const request = await admin
    .makeApiClient(CoreV1Api)
    .createNamespacedServiceAccountToken({ name: account, namespace, body: { spec: { audiences: [], expirationSeconds: 3600 } } });
  const cluster = admin.getCurrentCluster();
  // Pooled, as the agent's own (src/runtime/kubernetes/kube-connection.ts).
  const config = new PooledKubeConfig();
  config.loadFromOptions({
    clusters: [{ name: 'local', server: cluster?.server ?? '', caData: cluster?.caData, skipTLSVerify: false }],
    users: [{ name: account, token: request.status?.token ?? '' }],
    contexts: [{ name: 'agent', cluster: 'local', user: account }],
    currentContext: 'agent',
  });
  // The API server's RBAC authorizer learns new bindings a moment later: until then the agent is refused.
  const granted = () => config.makeApiClient(AppsV1Api).listNamespacedDeployment({ namespace }).then(() => true, () => false);
  if (!(await eventually(granted, 30_000, 200))) throw new Error(`the chart's Role never took effect in ${namespace}`);
  return config;
}

/**
 * A test bot's Deployment: the busybox image (imported, never pulled) running
 * `script` with `args`; its pods selected by TEST_NAME_LABEL, and labelled as
 * the bot unless `labelled` is false.
 */
export function botDeployment(
  id: string,
  options: { labelled?: boolean; owner?: string; replicas?: number; graceS?: number; minReadyS?: number; script?: string; args?: string[]; image?: string; env?: Record<string, string> } = {},
): V1Deployment {
  const name = objectName(id);
  const labels: Record<string, string> = { [TEST_NAME_LABEL]: name };
  if (options.labelled !== false) labels[BOT_LABEL] = id;
  return {
    metadata: { name, labels, annotations: { [OWNER_LABEL]: options.owner ?? 'user_1' } },
    spec: {
      replicas: options.replicas ?? 1,
      minReadySeconds: options.minReadyS,
      selector: { matchLabels: { [TEST_NAME_LABEL]: name } },
      template: {
        metadata: { labels },
        spec: {
          terminationGracePeriodSeconds: options.graceS ?? 2,
          containers: [
            {
              name: 'bot',
              image: options.image ?? TEST_IMAGE,
              imagePullPolicy: 'Never',
              command: ['sh', '-c', options.script ?? TALKING_BOT, 'sh', ...(options.args ?? [])],
              env: Object.entries(options.env ?? {}).map(([name, value]) => ({ name, value })),
            },
          ],
        },
      },
    },
  };
}

/** The label by which kwok's stages (scripts/kube/kwok-stages.yaml) make a simulated pod crash five times. */
export const KWOK_CRASH_LABEL = 'bot-agent.test/kwok-crash';

/** A bot Deployment for kwok's simulated node (`npm run kube:kwok`): no real pod lands there; `crashing`: a crash loop by stage. */
export function kwokBotDeployment(id: string, crashing: boolean): V1Deployment {
  const deployment = botDeployment(id, { image: 'simulated.invalid/bot:1' });
  const template = deployment.spec!.template;
  if (crashing) template.metadata!.labels![KWOK_CRASH_LABEL] = 'true';
  template.spec!.nodeSelector = { type: 'kwok' };
  template.spec!.tolerations = [{ key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' }];
  return deployment;
}

function newest(pods: V1Pod[]): V1Pod | undefined {
  const live = pods.filter((pod) => pod.status?.phase === 'Running' && !pod.metadata?.deletionTimestamp);
  return live.sort((a, b) => String(b.metadata?.creationTimestamp).localeCompare(String(a.metadata?.creationTimestamp)))[0];
}

/**
 * The real cluster of `npm run kube:up`: bots are Deployments of the busybox
 * test image in a namespace of this run's own, the agent runs in the test on
 * the real driver with the chart's RBAC (rendered with `chartValues`), and a bot calls it from inside its
 * pod (exec, busybox nc to 10.88.0.1), so that its pod IP is who it is.
 */
export async function clusterHarness(
  chartValues: Record<string, string> = {},
  /** The main agent's watchdog (and crash back-offs): on unless a test's own agent is to be the only one that acts. */
  mainWatchdog: TestAgentOptions['watchdog'] = {},
): Promise<{ harness: RuntimeHarness; namespace: string; agentConfig: KubeConfig }> {
  const admin = adminKubeConfig();
  const runId = randomBytes(3).toString('hex');
  const namespace = `bots-${runId}`;
  await run('bash', ['scripts/kube/images.sh', TEST_IMAGE]);
  const agentConfig = await agentKubeConfig(admin, namespace, chartValues);
  const apps = admin.makeApiClient(AppsV1Api);
  const core = admin.makeApiClient(CoreV1Api);
  const agents: TestAgent[] = [];
  // The main agent's watchdog looks after the namespace's bots; further agents (each with a store of its own) have none.
  const agentOver = async (kubeConfig: KubeConfig, restartTimeoutMs = 60_000, watchdog: TestAgentOptions['watchdog'] = 'off'): Promise<TestAgent> => {
    const agent = await startAgent(createKubernetesDriver({ kubeConfig, namespace }), { restartTimeoutMs, watchdog }, '0.0.0.0');
    agents.push(agent);
    return agent;
  };
  const main = await agentOver(agentConfig, 60_000, mainWatchdog);
  // As behind a Service: calls come once the agent is ready (its first watches synced).
  if (!(await eventually(async () => (await call(main.server, '/readyz')).status === 200, 30_000, 50))) throw new Error('the agent never became ready');
  let bots = 0;
  const newBotId = () => `bot_${process.pid}_${++bots}_${runId}`;
  const podsOf = async (bot: HarnessBot) =>
    (await core.listNamespacedPod({ namespace, labelSelector: `${TEST_NAME_LABEL}=${objectName(bot.id)}` })).items;
  const metrics = admin.makeApiClient(CustomObjectsApi);
  const hasMetrics = async (bot: HarnessBot) => {
    const pod = newest(await podsOf(bot))?.metadata?.name ?? '';
    const group = { group: 'metrics.k8s.io', version: 'v1beta1', namespace, plural: 'pods', name: pod };
    return metrics.getNamespacedCustomObject(group).then(() => true, () => false);
  };
  const running = async (bot: HarnessBot) => {
    const deployment = await apps.readNamespacedDeployment({ name: objectName(bot.id), namespace });
    return (deployment.spec?.replicas ?? 1) > 0 && newest(await podsOf(bot)) !== undefined;
  };

  const harness: RuntimeHarness = {
    name: 'kubernetes (real cluster)',
    agent: main.server,
    async createBot(options: BotOptions = {}) {
      const id = newBotId();
      const deployment = botDeployment(id, {
        labelled: options.labelled !== false,
        owner: options.owner,
        replicas: options.running === false ? 0 : 1,
        graceS: options.slowRestartMs ? Math.ceil(options.slowRestartMs / 1000) : 2,
        // A rollout ends once the new pod is available, not once the old one is gone: a slow restart is one whose
        // new pod counts as available only after this long (as on Docker, where the old run's grace holds it).
        minReadyS: options.slowRestartMs ? Math.ceil(options.slowRestartMs / 1000) : undefined,
        script: options.slowRestartMs ? STUBBORN_BOT : options.paced ? PACED_BOT : TALKING_BOT,
        args: options.logLines,
      });
      await apps.createNamespacedDeployment({ namespace, body: deployment });
      const bot = { id };
      if (options.running !== false && !(await eventually(() => running(bot), 60_000, 200))) {
        throw new Error(`bot ${id} never ran`);
      }
      // metrics-server knows a pod once it has scraped it twice (15 s apart): until then its stats
      // are a 503 saying so. A bot is ready for the behaviours once they exist.
      if (options.running !== false && !(await eventually(() => hasMetrics(bot), 90_000, 1_000))) {
        throw new Error(`metrics-server never reported bot ${id}`);
      }
      return bot;
    },
    newBotId,
    running,
    runId: async (bot) => newest(await podsOf(bot))?.metadata?.name ?? 'none',
    // Each rollout makes a ReplicaSet; scaling does not.
    restartCount: async (bot) =>
      (await apps.listNamespacedReplicaSet({ namespace, labelSelector: `${TEST_NAME_LABEL}=${objectName(bot.id)}` })).items.length - 1,
    async callFromBot(bot, request) {
      const pod = newest(await podsOf(bot))?.metadata?.name;
      if (!pod) throw new Error(`bot ${bot.id} has no running pod`);
      const { port } = main.server.address() as AddressInfo;
      return httpFromPod(admin, namespace, pod, { host: HOST_ADDRESS, port }, request);
    },
    agentWithRestartTimeout: async (ms) => (await agentOver(agentConfig, ms)).server,
    unreachableAgent: async () => (await agentOver(await unreachableKubeConfig())).server,
    async close() {
      await Promise.all(agents.map((agent) => agent.close()));
      await core.deleteNamespace({ name: namespace }).catch(() => undefined);
    },
  };
  return { harness, namespace, agentConfig };
}

/** `config` with its API server reached at another address (e.g. a proxy on loopback, which its certificate names). */
export function reachedAt(config: KubeConfig, server: string): KubeConfig {
  const cluster = config.getCurrentCluster();
  const user = config.getCurrentUser();
  const moved = new PooledKubeConfig();
  moved.loadFromOptions({
    clusters: [{ name: 'moved', server, caData: cluster?.caData, skipTLSVerify: false }],
    users: [{ name: 'agent', token: user?.token }],
    contexts: [{ name: 'moved', cluster: 'moved', user: 'agent' }],
    currentContext: 'moved',
  });
  return moved;
}
