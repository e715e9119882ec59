import { readFileSync } from 'node:fs';
import { access } from 'node:fs/promises';
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

// Read synchronously: cgroup files are the kernel's counters in memory, read in a few microseconds,
// where an asynchronous read costs a round trip through the thread pool per file (at 300 bots read
// once a second, half a core).
const text = (path: string): string => readFileSync(path, 'utf8');
const field = (stat: string, name: string): number => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(stat)?.[1] ?? 0);

function readAt({ dir, cpuDir, v2 }: Place): CgroupReading {
  const [cpu, usage, stat, limit] = v2
    ? [text(`${cpuDir}/cpu.stat`), text(`${dir}/memory.current`), text(`${dir}/memory.stat`), text(`${dir}/memory.max`)]
    : [text(`${cpuDir}/cpuacct.usage`), text(`${dir}/memory.usage_in_bytes`), text(`${dir}/memory.stat`), text(`${dir}/memory.limit_in_bytes`)];
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
export function readCgroup(containerId: string, root = '/sys/fs/cgroup'): CgroupReading | undefined {
  for (const place of places(containerId, root)) {
    try {
      return readAt(place);
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

/** CPU % is measured over at least this long: reads closer together get the last answer. */
export const MIN_INTERVAL_MS = 1_000;
/** How often it is checked again whether the engine's cgroups are visible under the root. */
const VISIBILITY_CHECK_MS = 60_000;

interface Measured {
  /** The reading the next interval starts from. */
  baseline: CgroupReading;
  /** The last answer, given again to reads within MIN_INTERVAL_MS of its baseline. */
  answer: BotStats | undefined;
  /** A first read under way (it measures MIN_INTERVAL_MS), which reads meanwhile share. */
  first: Promise<BotStats | undefined> | undefined;
}

/**
 * Stats read from the host's cgroup files on demand, with no engine stream
 * kept open: CPU % over the interval since this run's previous reading (at
 * least MIN_INTERVAL_MS; a first read waits that long), memory as of the
 * reading. Undefined where the files cannot be read, and the engine answers.
 */
export class CgroupStats {
  private readonly runs = new Map<string, Measured>();
  private visibility: { checkedAt: number; visible: Promise<boolean> } | undefined;

  constructor(
    private readonly root = '/sys/fs/cgroup',
    private readonly maxRuns = 20_000,
  ) {}

  async stats(containerId: string, startedAt: Date): Promise<BotStats | undefined> {
    if (!(await this.visible())) return undefined;
    // A run is its container and start: a restarted container's counters begin again.
    const key = `${containerId}:${startedAt.getTime()}`;
    const measured = this.runs.get(key);
    if (!measured) return this.first(key, containerId, startedAt);
    if (measured.first) return measured.first;
    if (measured.answer && Number(process.hrtime.bigint() - measured.baseline.at) < MIN_INTERVAL_MS * 1e6) {
      return { ...measured.answer, startedAt };
    }
    const reading = readCgroup(containerId, this.root);
    if (!reading) {
      this.runs.delete(key);
      return undefined;
    }
    measured.answer = statsBetween(measured.baseline, reading, startedAt);
    measured.baseline = reading;
    return measured.answer;
  }

  /** Whether the engine's cgroups are under the root at all (not so in a container without the host's tree mounted). */
  private visible(): Promise<boolean> {
    if (!this.visibility || Date.now() - this.visibility.checkedAt > VISIBILITY_CHECK_MS) {
      const parents = ['cpuacct/docker', 'cpuacct/system.slice', 'system.slice', 'docker'].map((dir) => `${this.root}/${dir}`);
      const visible = Promise.any(parents.map((dir) => access(dir))).then(() => true, () => false);
      this.visibility = { checkedAt: Date.now(), visible };
    }
    return this.visibility.visible;
  }

  /** Takes the run's first two readings MIN_INTERVAL_MS apart; filed at once, so that reads meanwhile wait for it. */
  private first(key: string, containerId: string, startedAt: Date): Promise<BotStats | undefined> {
    const measured: Measured = { baseline: { cpuNs: 0, at: 0n, memoryBytes: 0, limitBytes: 0 }, answer: undefined, first: undefined };
    measured.first = (async () => {
      const before = readCgroup(containerId, this.root);
      if (!before) {
        this.runs.delete(key);
        return undefined;
      }
      await new Promise((resolve) => setTimeout(resolve, MIN_INTERVAL_MS));
      const after = readCgroup(containerId, this.root);
      measured.first = undefined;
      if (!after) {
        this.runs.delete(key);
        return undefined;
      }
      measured.answer = statsBetween(before, after, startedAt);
      measured.baseline = after;
      return measured.answer;
    })();
    // Oldest first: a Map keeps insertion order.
    if (this.runs.size >= this.maxRuns) this.runs.delete(this.runs.keys().next().value!);
    this.runs.set(key, measured);
    return measured.first;
  }
}
