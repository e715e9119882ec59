import { closeSync, openSync, readlinkSync, readSync } from 'node:fs';
import { access } from 'node:fs/promises';
import { totalmem } from 'node:os';
import type { BotIo, BotStats } from '../driver.js';

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
  /** Its network and block I/O so far, where the files that count them could be read. */
  readonly io?: BotIo;
}

interface Place {
  readonly cpu: string;
  readonly usage: string;
  readonly stat: string;
  readonly limit: string;
  /** Bytes read and written on block devices: io.stat (v2), blkio.throttle.io_service_bytes (v1). */
  readonly io: string;
  /** The cgroup's processes: the first one's network namespace is the container's. */
  readonly procs: string;
  readonly v2: boolean;
}

/** Where the engine puts a container's cgroup files: v1 or v2, with the cgroupfs or the systemd driver. */
function places(id: string, root: string): Place[] {
  const v1 = (cpuDir: string, dir: string, blkioDir: string): Place => ({
    cpu: `${cpuDir}/cpuacct.usage`,
    usage: `${dir}/memory.usage_in_bytes`,
    stat: `${dir}/memory.stat`,
    limit: `${dir}/memory.limit_in_bytes`,
    io: `${blkioDir}/blkio.throttle.io_service_bytes`,
    procs: `${dir}/cgroup.procs`,
    v2: false,
  });
  const v2 = (dir: string): Place => ({
    cpu: `${dir}/cpu.stat`,
    usage: `${dir}/memory.current`,
    stat: `${dir}/memory.stat`,
    limit: `${dir}/memory.max`,
    io: `${dir}/io.stat`,
    procs: `${dir}/cgroup.procs`,
    v2: true,
  });
  return [
    v1(`${root}/cpuacct/docker/${id}`, `${root}/memory/docker/${id}`, `${root}/blkio/docker/${id}`),
    v1(`${root}/cpuacct/system.slice/docker-${id}.scope`, `${root}/memory/system.slice/docker-${id}.scope`, `${root}/blkio/system.slice/docker-${id}.scope`),
    v2(`${root}/system.slice/docker-${id}.scope`),
    v2(`${root}/docker/${id}`),
  ];
}

const usageUsec = /^usage_usec (\d+)$/m;
const inactiveV1 = /^total_inactive_file (\d+)$/m;
const inactiveV2 = /^inactive_file (\d+)$/m;
const matched = (pattern: RegExp, text: string): number => Number(pattern.exec(text)?.[1] ?? 0);

/** Asked once: each call is a system call, which here cost about as much as reading the four files. */
const HOST_MEMORY = totalmem();

/** One shared buffer: cgroup files are read synchronously, one at a time. */
let buffer = Buffer.alloc(16 * 1024);

/**
 * A container's cgroup files, held open: a reading is then one pread per
 * file, where opening and closing each file as well took four times as long.
 * Read synchronously: they are the kernel's counters in memory, read in a few
 * microseconds, where an asynchronous read costs a round trip through the thread pool.
 * The four of CPU and memory are needed; its block I/O file and its network
 * namespace's /proc/<pid>/net/dev are read where they can be opened.
 */
class CgroupFiles {
  private constructor(
    private readonly fds: readonly [number, number, number, number],
    private readonly v2: boolean,
    private readonly io: number | undefined,
    private readonly net: number | undefined,
  ) {}

  /** The container's files, or undefined when its cgroup is not visible under `root`. */
  static open(containerId: string, root: string): CgroupFiles | undefined {
    for (const place of places(containerId, root)) {
      const fds: number[] = [];
      try {
        for (const path of [place.cpu, place.usage, place.stat, place.limit]) fds.push(openSync(path, 'r'));
        return new CgroupFiles(fds as [number, number, number, number], place.v2, openedOrNot(place.io), netDevOf(place.procs));
      } catch {
        // Not this layout, or not visible from here.
        for (const fd of fds) closeSync(fd);
      }
    }
    return undefined;
  }

  /** A reading now; undefined once the cgroup is gone (its container removed). */
  read(): CgroupReading | undefined {
    try {
      const [cpu, usage, stat, limit] = this.fds.map(text);
      const used = Number(usage);
      const inactive = matched(this.v2 ? inactiveV2 : inactiveV1, stat!);
      const limitBytes = limit!.trim() === 'max' ? Infinity : Number(limit);
      return {
        cpuNs: this.v2 ? matched(usageUsec, cpu!) * 1000 : Number(cpu),
        at: process.hrtime.bigint(),
        memoryBytes: inactive < used ? used - inactive : used,
        limitBytes: Math.min(limitBytes, HOST_MEMORY),
        io: { ...blockIo(this.io === undefined ? undefined : textOrNot(this.io), this.v2), ...networkIo(this.net === undefined ? undefined : textOrNot(this.net)) },
      };
    } catch {
      return undefined;
    }
  }

  close(): void {
    for (const fd of [...this.fds, this.io, this.net]) if (fd !== undefined) closeSync(fd);
  }
}

function openedOrNot(path: string): number | undefined {
  try {
    return openSync(path, 'r');
  } catch {
    return undefined;
  }
}

function textOrNot(fd: number): string | undefined {
  try {
    return text(fd);
  } catch {
    return undefined;
  }
}

/**
 * The container's network counters: /proc/<pid>/net/dev of its first process, seen from an agent in the host's
 * process namespace. None for a container in the agent's own network namespace (host networking): those are the host's.
 */
function netDevOf(procsPath: string): number | undefined {
  const fd = openedOrNot(procsPath);
  if (fd === undefined) return undefined;
  try {
    const pid = /^\d+/m.exec(text(fd))?.[0];
    if (pid === undefined || readlinkSync(`/proc/${pid}/ns/net`) === readlinkSync('/proc/self/ns/net')) return undefined;
    return openedOrNot(`/proc/${pid}/net/dev`);
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

const ioStatLine = /\brbytes=(\d+) wbytes=(\d+)/g;
const blkioLine = /^\S+ (Read|Write) (\d+)$/gm;

/** Bytes read and written on block devices, summed over devices, as `docker stats` sums them; null where unknown. */
export function blockIo(text: string | undefined, v2: boolean): Pick<BotIo, 'blockReadBytes' | 'blockWriteBytes'> {
  if (text === undefined) return { blockReadBytes: null, blockWriteBytes: null };
  let read = 0;
  let written = 0;
  if (v2) {
    for (const [, r, w] of text.matchAll(ioStatLine)) {
      read += Number(r);
      written += Number(w);
    }
  } else {
    for (const [, op, value] of text.matchAll(blkioLine)) {
      if (op === 'Read') read += Number(value);
      else written += Number(value);
    }
  }
  return { blockReadBytes: read, blockWriteBytes: written };
}

const netDevLine = /^\s*([^\s:]+):\s*(\d+)(?:\s+\d+){7}\s+(\d+)/gm;

/** Bytes received and sent on every interface of the namespace but loopback, as the engine counts them; null where unknown. */
export function networkIo(text: string | undefined): Pick<BotIo, 'networkRxBytes' | 'networkTxBytes'> {
  if (text === undefined) return { networkRxBytes: null, networkTxBytes: null };
  let received = 0;
  let sent = 0;
  for (const [, name, rx, tx] of text.matchAll(netDevLine)) {
    if (name === 'lo') continue;
    received += Number(rx);
    sent += Number(tx);
  }
  return { networkRxBytes: received, networkTxBytes: sent };
}

/** The whole file, read again from its start (cgroup files are a few hundred bytes; the buffer grows for more). */
function text(fd: number): string {
  let length = 0;
  for (;;) {
    const got = readSync(fd, buffer, length, buffer.length - length, length);
    length += got;
    // A short read is the end: the kernel fills what it is given of a cgroup file.
    if (length < buffer.length) return buffer.toString('latin1', 0, length);
    buffer = Buffer.concat([buffer, Buffer.alloc(buffer.length)]);
  }
}

/**
 * One reading of the container's cgroup files when this process can see the
 * host's cgroup tree (an agent on the host, or one given /sys/fs/cgroup); else undefined.
 */
export function readCgroup(containerId: string, root = '/sys/fs/cgroup'): CgroupReading | undefined {
  const files = CgroupFiles.open(containerId, root);
  try {
    return files?.read();
  } finally {
    files?.close();
  }
}

/** Stats over the interval between two readings: CPU % as the docker CLI gives it (100 = one full CPU). */
export function statsBetween(before: CgroupReading, after: CgroupReading, startedAt: Date): BotStats {
  const wallNs = Number(after.at - before.at);
  const cpuNs = Math.max(0, after.cpuNs - before.cpuNs);
  return {
    cpuPercent: wallNs > 0 ? (cpuNs / wallNs) * 100 : 0,
    memoryBytes: after.memoryBytes,
    memoryPercent: after.limitBytes > 0 ? (after.memoryBytes / after.limitBytes) * 100 : 0,
    memoryLimitBytes: after.limitBytes,
    startedAt,
    ...(after.io ? { io: after.io } : {}),
  };
}

/** CPU % is measured over at least this long: reads closer together get the last answer. */
export const MIN_INTERVAL_MS = 1_000;
/** How often it is checked again whether the engine's cgroups are visible under the root. */
const VISIBILITY_CHECK_MS = 60_000;

/** Resolves at `at` (process.hrtime, ns): a timer alone may fire up to a loop turn early. */
async function until(at: bigint): Promise<void> {
  for (let left = at - process.hrtime.bigint(); left > 0n; left = at - process.hrtime.bigint()) {
    await new Promise((resolve) => setTimeout(resolve, Math.ceil(Number(left) / 1e6)));
  }
}

/** At most this many runs' files are held open (four to six descriptors each); readings of others open and close them. */
const MAX_HELD = 2_000;
/** A run's files unread for this long are closed: an open file keeps a removed container's cgroup in the kernel. */
const HOLD_MS = 60_000;

interface Measured {
  /** When the run measured started (ms since the epoch): a container started again is a new run, whose counters begin again. */
  readonly startedMs: number;
  /** The reading the next interval starts from. */
  baseline: CgroupReading;
  /** The last answer, given again to reads within MIN_INTERVAL_MS of its baseline. */
  answer: BotStats | undefined;
  /** A first read under way (it measures MIN_INTERVAL_MS), which reads meanwhile share. */
  first: Promise<BotStats | undefined> | undefined;
  /** The run's cgroup files, held open while it is read. */
  files: CgroupFiles | undefined;
  /** When it was last read (Date.now). */
  readAt: number;
}

/** The run's last answer while its baseline is less than MIN_INTERVAL_MS old (the caller checked that it is the same run). */
function fresh(measured: Measured): BotStats | undefined {
  if (measured.answer && Number(process.hrtime.bigint() - measured.baseline.at) < MIN_INTERVAL_MS * 1e6) return measured.answer;
  return undefined;
}

/**
 * Stats read from the host's cgroup files on demand, with no engine stream
 * kept open: CPU % over the interval since this run's previous reading (at
 * least MIN_INTERVAL_MS; a first read waits that long), memory as of the
 * reading. Undefined where the files cannot be read, and the engine answers.
 */
export class CgroupStats {
  /** Each container's current run, by container id (a plain id, where a key of id and start was a string built per read). */
  private readonly runs = new Map<string, Measured>();
  private visibility: { checkedAt: number; visible: Promise<boolean> } | undefined;
  private held = 0;
  private sweeper: NodeJS.Timeout | undefined;

  constructor(
    private readonly root = '/sys/fs/cgroup',
    private readonly maxRuns = 20_000,
  ) {}

  /**
   * The run's last answer while it is less than MIN_INTERVAL_MS old, else undefined:
   * what most reads of a busy bot get, with no file read and no wait.
   */
  recent(containerId: string, startedAt: Date): BotStats | undefined {
    const measured = this.runs.get(containerId);
    return measured?.startedMs === startedAt.getTime() ? fresh(measured) : undefined;
  }

  async stats(containerId: string, startedAt: Date): Promise<BotStats | undefined> {
    if (!(await this.visible())) return undefined;
    const measured = this.runs.get(containerId);
    if (measured?.startedMs !== startedAt.getTime()) return this.first(containerId, startedAt);
    if (measured.first) return measured.first;
    const recent = fresh(measured);
    if (recent) return recent;
    const reading = this.read(measured, containerId);
    if (!reading) return undefined;
    measured.answer = statsBetween(measured.baseline, reading, startedAt);
    measured.baseline = reading;
    return measured.answer;
  }

  /** Closes every file held. */
  close(): void {
    for (const measured of this.runs.values()) this.release(measured);
    clearInterval(this.sweeper);
    this.sweeper = undefined;
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

  /**
   * Takes the run's first two readings MIN_INTERVAL_MS apart; filed at once, so that reads meanwhile wait for it.
   * It takes the place of the container's previous run, whose files are let go (a restart makes the cgroup anew).
   */
  private first(containerId: string, startedAt: Date): Promise<BotStats | undefined> {
    const previous = this.runs.get(containerId);
    if (previous) {
      this.release(previous);
      this.runs.delete(containerId);
    }
    const measured: Measured = {
      startedMs: startedAt.getTime(),
      baseline: { cpuNs: 0, at: 0n, memoryBytes: 0, limitBytes: 0 },
      answer: undefined,
      first: undefined,
      files: undefined,
      readAt: 0,
    };
    // Oldest first: a Map keeps insertion order. Filed before the first reading, which forgets it should it fail.
    if (this.runs.size >= this.maxRuns) {
      const [oldestKey, oldest] = this.runs.entries().next().value!;
      this.release(oldest);
      this.runs.delete(oldestKey);
    }
    this.runs.set(containerId, measured);
    measured.first = (async () => {
      const before = this.read(measured, containerId);
      if (!before) return undefined;
      await until(before.at + BigInt(MIN_INTERVAL_MS * 1e6));
      const after = this.read(measured, containerId);
      measured.first = undefined;
      if (!after) return undefined;
      measured.answer = statsBetween(before, after, startedAt);
      measured.baseline = after;
      return measured.answer;
    })();
    return measured.first;
  }

  /** A reading of the run's files, held open while there is room; none (and the run forgotten) once they cannot be read. */
  private read(measured: Measured, containerId: string): CgroupReading | undefined {
    measured.readAt = Date.now();
    // A run no longer filed (evicted, or its container started again) is read without holding its files: nothing would let them go.
    if (!measured.files && this.held < MAX_HELD && this.runs.get(containerId) === measured) {
      measured.files = CgroupFiles.open(containerId, this.root);
      if (measured.files) this.hold();
    }
    const reading = measured.files ? measured.files.read() : readCgroup(containerId, this.root);
    if (!reading) {
      this.release(measured);
      // Only this run is forgotten: a later run of the container may have taken its place meanwhile.
      if (this.runs.get(containerId) === measured) this.runs.delete(containerId);
    }
    return reading;
  }

  private hold(): void {
    this.held++;
    this.sweeper ??= setInterval(() => this.sweep(), HOLD_MS).unref();
  }

  private release(measured: Measured): void {
    if (!measured.files) return;
    measured.files.close();
    measured.files = undefined;
    this.held--;
  }

  /** Closes the files of runs not read for HOLD_MS (a bot no longer read, a run that ended). */
  private sweep(): void {
    const unreadSince = Date.now() - HOLD_MS;
    for (const measured of this.runs.values()) if (measured.readAt < unreadSince) this.release(measured);
    if (this.held === 0) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
  }
}
