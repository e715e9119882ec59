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

/** The pod's limits summed over its containers, or undefined when any container has none. */
export function podLimits(pod: V1Pod): Capacity | undefined {
  const each = (pod.spec?.containers ?? []).map((container) => capacityOf(container.resources?.limits));
  if (each.length === 0 || each.some((capacity) => capacity === undefined)) return undefined;
  return {
    cpuCores: each.reduce((sum, capacity) => sum + (capacity?.cpuCores ?? 0), 0),
    memoryBytes: each.reduce((sum, capacity) => sum + (capacity?.memoryBytes ?? 0), 0),
  };
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
