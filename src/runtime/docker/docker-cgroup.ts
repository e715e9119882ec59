import { readFile } from 'node:fs/promises';
import { totalmem } from 'node:os';
import type { BotStats } from '../driver.js';

/** One reading of a container's cgroup: CPU time used so far, and memory now. */
export interface CgroupReading {
  /** CPU time the container has used, in nanoseconds. */
  readonly cpuNs: number;
  /** When the reading was taken (process.hrtime, nanoseconds). */
  readonly at: bigint;
  /** Memory in use without inactive page cache, as the docker CLI counts it. */
  readonly memoryBytes: number;
  /** The container's memory limit, or the host's memory when it has none. */
  readonly limitBytes: number;
}

interface Place {
  dir: string;
  cpuDir: string;
  v2: boolean;
}

/** Where the engine puts a container's cgroup: v1 or v2, with the cgroupfs or the systemd driver. */
function places(id: string, root: string): Place[] {
  return [
    { cpuDir: `${root}/cpuacct/docker/${id}`, dir: `${root}/memory/docker/${id}`, v2: false },
    { cpuDir: `${root}/cpuacct/system.slice/docker-${id}.scope`, dir: `${root}/memory/system.slice/docker-${id}.scope`, v2: false },
    { cpuDir: `${root}/system.slice/docker-${id}.scope`, dir: `${root}/system.slice/docker-${id}.scope`, v2: true },
    { cpuDir: `${root}/docker/${id}`, dir: `${root}/docker/${id}`, v2: true },
  ];
}

const text = (path: string): Promise<string> => readFile(path, 'utf8');
const field = (stat: string, name: string): number => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(stat)?.[1] ?? 0);

async function readAt({ dir, cpuDir, v2 }: Place): Promise<CgroupReading> {
  const [cpu, usage, stat, limit] = await Promise.all(
    v2
      ? [text(`${cpuDir}/cpu.stat`), text(`${dir}/memory.current`), text(`${dir}/memory.stat`), text(`${dir}/memory.max`)]
      : [text(`${cpuDir}/cpuacct.usage`), text(`${dir}/memory.usage_in_bytes`), text(`${dir}/memory.stat`), text(`${dir}/memory.limit_in_bytes`)],
  );
  const used = Number(usage);
  const inactive = field(stat, v2 ? 'inactive_file' : 'total_inactive_file');
  const limitBytes = limit.trim() === 'max' ? Infinity : Number(limit);
  return {
    cpuNs: v2 ? field(cpu, 'usage_usec') * 1000 : Number(cpu),
    at: process.hrtime.bigint(),
    memoryBytes: inactive < used ? used - inactive : used,
    limitBytes: Math.min(limitBytes, totalmem()),
  };
}

/**
 * Reads the container's cgroup files when this process can see the host's
 * cgroup tree (an agent on the host, or one given /sys/fs/cgroup); else undefined.
 */
export async function readCgroup(containerId: string, root = '/sys/fs/cgroup'): Promise<CgroupReading | undefined> {
  for (const place of places(containerId, root)) {
    try {
      return await readAt(place);
    } catch {
      // Not this layout, or not visible from here.
    }
  }
  return undefined;
}

/** Stats over the interval between two readings: CPU % as the docker CLI gives it (100 = one full CPU). */
export function statsBetween(before: CgroupReading, after: CgroupReading, startedAt: Date): BotStats {
  const wallNs = Number(after.at - before.at);
  const cpuNs = Math.max(0, after.cpuNs - before.cpuNs);
  return {
    cpuPercent: wallNs > 0 ? (cpuNs / wallNs) * 100 : 0,
    memoryBytes: after.memoryBytes,
    memoryPercent: after.limitBytes > 0 ? (after.memoryBytes / after.limitBytes) * 100 : 0,
    startedAt,
  };
}
