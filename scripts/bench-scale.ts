// The scale part of npm run bench: many idle bots made in parallel, all read at
// once for the first time, then each read once a second while the agent's and
// the engine's CPU are measured against a quiet minute, and a burst of starts.
import { execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import type Docker from 'dockerode';

/** Idle without forking: a loop that sleeps would fork a process per bot every second. */
export const IDLE = "seq 1 200; trap 'exit 0' TERM; sleep 2147483647 & wait";
const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
/** How many containers are created and started at once. */
const PARALLEL = 16;

/** CPU time a process has used so far, in seconds, in its own code and in the kernel's for it; 0 once it is gone. */
export function cpuTimes(pid: number): { user: number; system: number } {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return { user: Number(fields[11]) / CLOCK_TICKS, system: Number(fields[12]) / CLOCK_TICKS };
  } catch {
    return { user: 0, system: 0 };
  }
}

/** CPU time a process has used so far, in seconds; 0 once it is gone. */
export function cpuSeconds(pid: number): number {
  const { user, system } = cpuTimes(pid);
  return user + system;
}

/** The Docker engine's processes: dockerd, its containerd and the shims of its containers (namespace moby). */
export function enginePids(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let args = '';
    try {
      args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ');
    } catch {
      continue;
    }
    if (/^(\S*\/)?dockerd( |$)/.test(args) || /containerd --config \/var\/run\/docker\//.test(args) || /containerd-shim\S* -namespace moby /.test(args)) {
      pids.push(Number(entry));
    }
  }
  return pids;
}

export function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) / 1024;
}

/** The machine's CPU time so far, busy and in all, in clock ticks (/proc/stat's first line). */
function machineTicks(): { busy: number; total: number } {
  const [user, nice, system, idle, iowait, irq, softirq, steal] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number) as number[];
  const busy = user! + nice! + system! + irq! + softirq! + steal!;
  return { busy, total: busy + idle! + iowait! };
}

/** The share of all the machine's cores that was busy while `work` ran (every process, the bench's own too), in percent. */
export async function machineBusyDuring<T>(work: () => Promise<T>): Promise<{ value: T; busyPercent: number }> {
  const before = machineTicks();
  const value = await work();
  const after = machineTicks();
  return { value, busyPercent: (100 * (after.busy - before.busy)) / Math.max(1, after.total - before.total) };
}

/** Percent of one core the processes used while `work` ran. */
export async function cpuPercentDuring(pids: () => number[], work: () => Promise<void>): Promise<number> {
  const watched = pids();
  const before = watched.map(cpuSeconds);
  const start = process.hrtime.bigint();
  await work();
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const used = watched.reduce((sum, pid, i) => sum + Math.max(0, cpuSeconds(pid) - (before[i] ?? 0)), 0);
  return (used / seconds) * 100;
}

/** Creates and starts `ids` as idle labelled bots on `network`, PARALLEL at a time. */
export async function makeBots(docker: Docker, ids: string[], options: { image: string; network: string; benchLabel: string; start?: boolean }): Promise<void> {
  const queue = [...ids];
  const worker = async (): Promise<void> => {
    for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
      const container = await docker.createContainer({
        name: id,
        Image: options.image,
        Cmd: ['sh', '-c', IDLE],
        Labels: { 'bot-agent/bot-id': id, 'bot-agent/user-id': 'user_1', 'bot-agent-bench': options.benchLabel },
        HostConfig: { NetworkMode: options.network },
      });
      if (options.start !== false) await container.start();
    }
  };
  await Promise.all(Array.from({ length: PARALLEL }, worker));
}

/**
 * Removes every container and the networks of this run from a process of its
 * own, so that it finishes even when the bench is interrupted; `wait` waits for it.
 */
export function removeEverything(benchLabel: string, networks: string, wait: boolean): Promise<void> {
  // A batch the engine does not finish within 5 minutes is given up (seen here once: an engine wedged by 1,000 bots).
  const script =
    `docker ps -aq --filter label=bot-agent-bench=${benchLabel} | xargs -r -n 50 -P 4 timeout 300 docker rm -f >/dev/null 2>&1; ` +
    `docker network rm ${networks} >/dev/null 2>&1; true`;
  const child = spawn('sh', ['-c', script], { detached: !wait, stdio: 'ignore' });
  if (!wait) {
    child.unref();
    return Promise.resolve();
  }
  return new Promise((resolve) => child.on('exit', () => resolve()));
}

/** A latency's p50 and p99 in ms, and req/s where a load measured it. */
export type Figures = { p50: number; p99: number; rps?: number };
const ms = (ns: bigint): number => Number(ns) / 1e6;
export const round = (value: number, digits = 2): number => Number(value.toFixed(digits));

/** The middle value of `values` (the upper of the two middle ones for an even count); NaN for none. */
export const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? NaN;

/** The p50 and p99 of `samples`, in ms to two decimals. */
export function percentiles(samples: number[]): Figures {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] ?? NaN;
  return { p50: round(at(0.5)), p99: round(at(0.99)) };
}

/** `call` made `times` times in a row; each one's time in ms. */
export async function timed(times: number, call: () => Promise<unknown>): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < times; i++) {
    const start = process.hrtime.bigint();
    await call();
    samples.push(ms(process.hrtime.bigint() - start));
  }
  return samples;
}

/** A POST that resolves once the whole answer is in; rejects unless it is a 200. */
export function post(base: string, path: string, body: string, agent: http.Agent): Promise<void> {
  return new Promise((resolve, reject) => {
    http
      .request(`${base}${path}`, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`${path}: HTTP ${res.statusCode}`))));
      })
      .on('error', reject)
      .end(body);
  });
}

/** One GET through `agent`; resolves with its time in ms, rejects unless it is a 200. */
export function timedGet(url: string, agent: http.Agent): Promise<number> {
  const start = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve(Number(process.hrtime.bigint() - start) / 1e6) : reject(new Error(`${url}: HTTP ${res.statusCode}`))));
      })
      .on('error', reject);
  });
}

/** Every bot's stats read once, all at once: the wall time until the last answer, in ms. */
export async function allAtOnce(base: string, ids: string[]): Promise<number> {
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const start = process.hrtime.bigint();
  await Promise.all(ids.map((id) => timedGet(`${base}/api/bots/${id}/stats`, agent)));
  return Number(process.hrtime.bigint() - start) / 1e6;
}

/**
 * Reads each bot's stats once a second for `seconds`, the reads spread evenly
 * over each second; resolves with every read's time in ms.
 */
export async function readEachSecond(base: string, ids: string[], seconds: number): Promise<number[]> {
  // In turns (FIFO), so that no pooled connection idles: one idle past the server's keep-alive timeout,
  // while a loaded machine delays the client's own earlier close, is reset under the next read.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64, scheduling: 'fifo' });
  const times: number[] = [];
  const failures: Error[] = [];
  const gapMs = 1000 / ids.length;
  const start = performance.now();
  const pending: Array<Promise<void>> = [];
  for (let n = 0; n < ids.length * seconds; n++) {
    const due = start + n * gapMs;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    pending.push(
      timedGet(`${base}/api/bots/${ids[n % ids.length]}/stats`, agent).then(
        (ms) => void times.push(ms),
        (err: Error) => void failures.push(err),
      ),
    );
  }
  await Promise.all(pending);
  agent.destroy();
  if (failures.length > 0) throw new Error(`${failures.length} of ${ids.length * seconds} reads failed, e.g. ${failures[0]?.message}`);
  return times;
}
