import type { BotIo, BotStats } from '../driver.js';

/** The part of the engine's stats answer the agent reads; engines may omit any of it. */
export interface DockerStatsSample {
  /** When it was read; the zero time once the container no longer runs. */
  read?: string;
  cpu_stats?: CpuSample;
  precpu_stats?: CpuSample;
  memory_stats?: {
    usage?: number;
    limit?: number;
    stats?: { total_inactive_file?: number; inactive_file?: number };
  };
  /** By interface; absent for a container in the host's network. */
  networks?: Record<string, { rx_bytes?: number; tx_bytes?: number }>;
  blkio_stats?: { io_service_bytes_recursive?: Array<{ op?: string; value?: number }> | null };
}

interface CpuSample {
  cpu_usage?: { total_usage?: number; percpu_usage?: number[] };
  system_cpu_usage?: number;
  online_cpus?: number;
}

/** CPU % between the sample's two readings, as the docker CLI computes it. */
export function cpuPercent(sample: DockerStatsSample): number {
  const now = sample.cpu_stats;
  const before = sample.precpu_stats;
  const cpuDelta = (now?.cpu_usage?.total_usage ?? 0) - (before?.cpu_usage?.total_usage ?? 0);
  const systemDelta = (now?.system_cpu_usage ?? 0) - (before?.system_cpu_usage ?? 0);
  const cpus = now?.online_cpus || now?.cpu_usage?.percpu_usage?.length || 1;
  if (!before?.system_cpu_usage || cpuDelta <= 0 || systemDelta <= 0) return 0;
  return (cpuDelta / systemDelta) * cpus * 100;
}

/** Memory in use without the page cache, as the docker CLI computes it (cgroup v1 and v2). */
export function memoryBytes(sample: DockerStatsSample): number {
  const usage = sample.memory_stats?.usage ?? 0;
  const stats = sample.memory_stats?.stats ?? {};
  const inactive = stats.total_inactive_file ?? stats.inactive_file ?? 0;
  return inactive < usage ? usage - inactive : usage;
}

/** Network and block I/O as the docker CLI sums them (cgroup v1 says `Read`, v2 `read`). */
export function ioOf(sample: DockerStatsSample): BotIo {
  const networks = sample.networks ? Object.values(sample.networks) : undefined;
  const blkio = sample.blkio_stats?.io_service_bytes_recursive;
  const blockSum = (op: string) => blkio!.reduce((sum, entry) => sum + (entry.op?.toLowerCase() === op ? (entry.value ?? 0) : 0), 0);
  return {
    networkRxBytes: networks ? networks.reduce((sum, net) => sum + (net.rx_bytes ?? 0), 0) : null,
    networkTxBytes: networks ? networks.reduce((sum, net) => sum + (net.tx_bytes ?? 0), 0) : null,
    blockReadBytes: blkio ? blockSum('read') : null,
    blockWriteBytes: blkio ? blockSum('write') : null,
  };
}

/** The driver's stats from one engine sample and the container's start time. */
export function botStatsFrom(sample: DockerStatsSample, startedAt: Date): BotStats {
  const used = memoryBytes(sample);
  const limit = sample.memory_stats?.limit ?? 0;
  return {
    cpuPercent: cpuPercent(sample),
    memoryBytes: used,
    memoryPercent: limit > 0 ? (used / limit) * 100 : 0,
    memoryLimitBytes: limit,
    startedAt,
    io: ioOf(sample),
  };
}
