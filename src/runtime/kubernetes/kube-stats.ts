import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { quantityToScalar } from '@kubernetes/client-node/dist/util.js';
import type { BotStats } from '../driver.js';

/** One pod's entry of metrics.k8s.io/v1beta1 `pods`. */
export interface PodMetrics {
  metadata?: { name?: string };
  containers?: Array<{ name?: string; usage?: { cpu?: string; memory?: string } }>;
}

/** What the percentages are taken against: CPU in cores, memory in bytes. */
export interface Capacity {
  cpuCores: number;
  memoryBytes: number;
}

const scalar = (quantity: string | undefined): number => Number(quantityToScalar(quantity ?? '0'));

function capacityOf(resources: { [name: string]: string } | undefined): Capacity | undefined {
  if (!resources?.cpu || !resources.memory) return undefined;
  return { cpuCores: scalar(resources.cpu), memoryBytes: scalar(resources.memory) };
}

/**
 * The pod's limits summed over its containers, each resource apart: undefined for a resource some container has no
 * limit of (a bot with a memory limit and none of CPU has its memory taken against its limit, its CPU the node's).
 */
export function podLimits(pod: V1Pod): Partial<Capacity> {
  const containers = pod.spec?.containers ?? [];
  const sum = (resource: 'cpu' | 'memory'): number | undefined => {
    const each = containers.map((container) => container.resources?.limits?.[resource]);
    return each.length === 0 || each.some((limit) => !limit) ? undefined : each.reduce((total, limit) => total + scalar(limit), 0);
  };
  const [cpuCores, memoryBytes] = [sum('cpu'), sum('memory')];
  return { ...(cpuCores === undefined ? {} : { cpuCores }), ...(memoryBytes === undefined ? {} : { memoryBytes }) };
}

/** What the node offers to pods. */
export function nodeAllocatable(node: V1Node): Capacity {
  return capacityOf(node.status?.allocatable) ?? { cpuCores: 0, memoryBytes: 0 };
}

/**
 * Stats from a pod's metrics. metrics-server reports CPU averaged over its
 * last window and memory as the working set, which leaves out inactive page cache.
 */
export function botStatsFromMetrics(metrics: PodMetrics, capacity: Capacity, startedAt: Date): BotStats {
  const containers = metrics.containers ?? [];
  const cpuCores = containers.reduce((sum, c) => sum + scalar(c.usage?.cpu), 0);
  const memoryBytes = containers.reduce((sum, c) => sum + scalar(c.usage?.memory), 0);
  return {
    cpuPercent: capacity.cpuCores > 0 ? (cpuCores / capacity.cpuCores) * 100 : 0,
    memoryBytes,
    memoryPercent: capacity.memoryBytes > 0 ? (memoryBytes / capacity.memoryBytes) * 100 : 0,
    memoryLimitBytes: capacity.memoryBytes,
    startedAt,
  };
}
