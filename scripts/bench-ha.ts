// The high-availability section of npm run bench: the chart as operators install it for no gap (two agents,
// one history in PostgreSQL) on the real cluster, asked for a bot's status every 100 ms through its Service
// while a helm upgrade rolls both agents and while each agent pod is deleted in turn. It counts the calls
// that failed and the longest time between two answered calls. The goal: no failed call, no gap of 1 s.
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import type { V1Pod } from '@kubernetes/client-node';
import { buildAgentImage, dockerCli } from '../test/helpers/agent-image.js';
import { TEST_IMAGE } from '../test/helpers/docker-fixture.js';
import { eventually } from '../test/helpers/eventually.js';
import { CHART, helm } from '../test/helpers/helm.js';
import { dropDatabases, freshDatabase } from '../test/helpers/postgres.js';
import { adminKubeConfig, botDeployment, HOST_ADDRESS } from '../test/kube-cluster/cluster-harness.js';

const run = promisify(execFile);
const PERIOD_MS = 100;

export interface Availability {
  /** What was done to the agents while the caller called. */
  event: string;
  calls: number;
  failed: number;
  /** The longest time from one answered call to the next, in ms (PERIOD_MS when none was missed). */
  longestGapMs: number;
  /** The slowest answered call, in ms. */
  slowestMs: number;
}

/** Calls `url` every PERIOD_MS until `stop` says so, one call at a time (a call's time-out is 5 s). */
function caller(url: string, token: string): { stop: () => Promise<Omit<Availability, 'event'>> } {
  let running = true;
  let calls = 0;
  let failed = 0;
  let slowestMs = 0;
  let lastAnswered = performance.now();
  let longestGapMs = 0;
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      calls += 1;
      try {
        const reply = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(5_000) });
        await reply.arrayBuffer();
        if (reply.status !== 200) throw new Error(`status ${reply.status}`);
        const now = performance.now();
        longestGapMs = Math.max(longestGapMs, now - lastAnswered);
        lastAnswered = now;
        slowestMs = Math.max(slowestMs, now - started);
      } catch {
        failed += 1;
      }
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, PERIOD_MS - (performance.now() - started))));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return { calls, failed, longestGapMs: Math.round(longestGapMs), slowestMs: Math.round(slowestMs) };
    },
  };
}

/**
 * Installs the chart with two replicas and a database of its own on the running cluster, and measures
 * a status caller through a rolling upgrade and through the deletion of each agent pod. Removes all it made.
 */
export async function availabilityOnCluster(): Promise<Availability[]> {
  const kubeconfig = process.env.BOT_AGENT_KUBECONFIG ?? '';
  // Pods reach PostgreSQL at the bridge's address, where scripts/postgres.sh listens once the cluster is up.
  process.env.BOT_AGENT_DATABASE_URL = execFileSync('bash', ['scripts/postgres.sh'], { encoding: 'utf8' }).trim().split('\n').at(-1);
  const runId = randomBytes(3).toString('hex');
  const namespace = `bench-ha-${runId}`;
  const image = `bot-agent-bench-ha:${runId}`;
  const token = randomBytes(24).toString('hex');
  const admin = adminKubeConfig();
  const core = admin.makeApiClient(CoreV1Api);
  const agents = async (): Promise<V1Pod[]> =>
    (await core.listNamespacedPod({ namespace, labelSelector: 'app.kubernetes.io/name=bot-agent' })).items.filter(
      (pod) => !pod.metadata?.deletionTimestamp && (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True'),
    );
  try {
    await buildAgentImage(image);
    await run('bash', ['scripts/kube/images.sh', image, TEST_IMAGE]);
    const url = new URL(await freshDatabase());
    url.hostname = HOST_ADDRESS;
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    await core.createNamespacedSecret({ namespace, body: { metadata: { name: 'history-db' }, stringData: { url: url.toString() } } });
    await core.createNamespacedSecret({ namespace, body: { metadata: { name: 'agent-admin' }, stringData: { token } } });
    const [repository, tag] = image.split(':') as [string, string];
    const chart = ['--namespace', namespace, '--kubeconfig', kubeconfig, '--wait', '--timeout', '3m'];
    await helm(
      'install', 'rel', CHART, ...chart,
      '--set', `image.repository=${repository}`, '--set-string', `image.tag=${tag}`, '--set', 'image.pullPolicy=Never',
      '--set', 'database.existingSecret=history-db', '--set', 'adminToken.existingSecret=agent-admin', '--set', 'adminToken.key=token',
    );
    const id = `bot_1_1_${runId}`;
    await admin.makeApiClient(AppsV1Api).createNamespacedDeployment({ namespace, body: botDeployment(id) });
    const serviceIp = (await core.readNamespacedService({ name: 'agent', namespace })).spec?.clusterIP ?? '';
    const status = `http://${serviceIp}:8000/api/bots/${id}`;
    const answered = () => fetch(status, { headers: { authorization: `Bearer ${token}` } }).then((r) => r.ok, () => false);
    if (!(await eventually(answered, 60_000, 250))) throw new Error(`the Service never answered ${status}`);

    const figures: Availability[] = [];
    const during = async (event: string, work: () => Promise<void>): Promise<void> => {
      const calling = caller(status, token);
      await work();
      // A deleted pod's last seconds (its preStop pause and drain) are part of what callers see.
      await new Promise((resolve) => setTimeout(resolve, 10_000));
      figures.push({ event, ...(await calling.stop()) });
    };
    await during('helm upgrade (both agents replaced, one at a time)', async () => {
      await helm('upgrade', 'rel', CHART, ...chart, '--reuse-values', '--set-string', `podAnnotations.rolled=${Date.now()}`);
    });
    await during('kubectl delete pod, each agent in turn', async () => {
      for (const pod of await agents()) {
        await core.deleteNamespacedPod({ namespace, name: pod.metadata?.name ?? '' });
        const replaced = async () => {
          const ready = await agents();
          return ready.length === 2 && !ready.some((other) => other.metadata?.name === pod.metadata?.name);
        };
        if (!(await eventually(replaced, 120_000, 250))) throw new Error(`${pod.metadata?.name} was never replaced`);
      }
    });
    return figures;
  } catch (err) {
    process.stderr.write(`bench: the agents' pods when it failed:\n${await podsSaying(core, namespace)}\n`);
    throw err;
  } finally {
    await helm('uninstall', 'rel', '--namespace', namespace, '--kubeconfig', kubeconfig).catch(() => undefined);
    await core.deleteNamespace({ name: namespace }).catch(() => undefined);
    await run(dockerCli, ['image', 'rm', '-f', image]).catch(() => undefined);
    await dropDatabases().catch(() => undefined);
  }
}

/** Each pod of `namespace`: its phase, its containers' states, and its latest events; what a failed install needs. */
async function podsSaying(core: CoreV1Api, namespace: string): Promise<string> {
  try {
    const pods = (await core.listNamespacedPod({ namespace })).items.map((pod) => {
      const containers = (pod.status?.containerStatuses ?? []).map(
        (c) => `${c.name} ready=${c.ready} restarts=${c.restartCount} ${JSON.stringify(c.state?.waiting ?? c.state?.terminated ?? c.lastState?.terminated ?? {})}`,
      );
      return `${pod.metadata?.name} ${pod.status?.phase} ${containers.join('; ')}`;
    });
    const events = (await core.listNamespacedEvent({ namespace })).items
      .slice(-15)
      .map((event) => `${event.involvedObject.name} ${event.reason}: ${event.message}`);
    return [...pods, ...events].join('\n');
  } catch (err) {
    return `(could not be read: ${(err as Error).message})`;
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.stdout.write(`${JSON.stringify(await availabilityOnCluster(), null, 2)}\n`);
  process.exit(0);
}
