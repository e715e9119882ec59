// npm run bench:docker-scale: 1,000 bots on the real engine, each reading its own stats once a second from its own
// address, as bots in their containers do (scripts/bench-bot-reads.py makes each bot's socket in its network
// namespace), the agent at its defaults pinned to one core and the readers to the other. Prints, for each
// 10 s window after a warm-up: the agent's CPU (% of a core) and RSS; and every answer that was not a 200, with
// its body. Then the same reads of the baselines (bare node:http, koa alone, koa keeping the agent's promises),
// the floor of any server at this rate from these addresses. Writes the section docker-scale of BENCHMARKS.md.
// Needs `npm test`'s set-up (the engine, its test image) and python3.
// Settings: BENCH_BOTS (1000), BENCH_MINUTES of reads of the agent (3; an hour says whether memory stays flat),
// BENCH_FRESH=1 for a new connection each read (a client that keeps none), BENCH_PROFILE_DIR for a CPU profile,
// BENCH_BASELINES=0 to read the agent alone, BENCH_KEEP=1 to leave the bots (and print their run's id), BENCH_REUSE=<id> to read those again (making 1,000 takes minutes).
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import Docker from 'dockerode';
import { agentProcess } from './bench-agent.js';
import { baselineServer } from './bench-baselines.js';
import type { BaselineKind } from './bench-baselines.js';
import { cpuSeconds, cpuTimes, enginePids, makeBots, median, percentiles, removeEverything, round, rssMb } from './bench-scale.js';
import { writeSection } from './bench-sections.js';
import { mapLimited } from '../src/map-limited.js';

const BOTS = Number(process.env.BENCH_BOTS ?? 1000);
const MINUTES = Number(process.env.BENCH_MINUTES ?? 3);
const FRESH = process.env.BENCH_FRESH === '1';
const PROFILE_DIR = process.env.BENCH_PROFILE_DIR;
const WARM_S = 20;
const WINDOW_S = 10;
const BASELINE_S = 40;
/** The agent's CPU for a read a second from each of 1,000 bots, in % of a core (docs/performance.md). */
const CPU_GOAL = 10;
const SERVER_CORE = '0';
const LOAD_CORE = '1';
const TEST_IMAGE = 'bot-agent-testbot:latest';

const docker = new Docker();
const REUSE = process.env.BENCH_REUSE;
const KEEP = process.env.BENCH_KEEP === '1';
const runId = REUSE ?? `ds${Date.now().toString(36)}`;
const network = `bot-agent-bench-${runId}`;

interface Reads {
  counts: Record<string, number>;
  samples: Record<string, { bot: string; at_s: number; body: string }>;
  failures: Array<{ bot: string; at_s: number; error: string; answered_on_connection: number; connection_age_s: number; idle_s: number; sent_again: boolean }>;
  sent_again: number;
  lags: Array<{ at_s: number; late_s: number }>;
  times_ms: number[];
}

/** Every bot reads its own stats from `agent` (an address bots reach) for `seconds`, through the Python reader. */
async function botsRead(agent: string, bots: Array<{ id: string; pid: number }>, seconds: number): Promise<Reads> {
  const reader = spawn('taskset', ['-c', LOAD_CORE, 'python3', 'scripts/bench-bot-reads.py'], { stdio: ['pipe', 'pipe', 'inherit'] });
  reader.stdin.end(JSON.stringify({ agent, seconds, fresh: FRESH, bots }));
  let out = '';
  reader.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const [code] = (await once(reader, 'exit')) as [number | null];
  // The reader's own failure is no figure: it fails the bench (a judge that crashed judged nothing).
  if (code !== 0) throw new Error(`the bots' reader exited with ${code}`);
  return JSON.parse(out) as Reads;
}

/**
 * The server's CPU (% of a core; and of it, the kernel's share: system time) and RSS (MB) in each WINDOW_S window
 * while `work` runs, the first `skipS` seconds left out.
 */
async function windows(pid: number, skipS: number, work: Promise<Reads>): Promise<{ cpu: number[]; system: number[]; rss: number[]; reads: Reads }> {
  const cpu: number[] = [];
  const system: number[] = [];
  const rss: number[] = [];
  let done = false;
  const reads = work.finally(() => (done = true));
  await Promise.race([reads, new Promise((resolve) => setTimeout(resolve, skipS * 1000))]);
  while (!done) {
    const before = cpuTimes(pid);
    const start = performance.now();
    await Promise.race([reads, new Promise((resolve) => setTimeout(resolve, WINDOW_S * 1000))]);
    const seconds = (performance.now() - start) / 1000;
    if (done && seconds < WINDOW_S * 0.9) break;
    const after = cpuTimes(pid);
    cpu.push(((after.user + after.system - before.user - before.system) / seconds) * 100);
    system.push(((after.system - before.system) / seconds) * 100);
    rss.push(rssMb(pid));
  }
  return { cpu, system, rss, reads: await reads };
}

/** The lowest and highest of the middle 80% of `values`. */
function spread(values: number[]): string {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] ?? NaN;
  return `${round(at(0.1), 1)}–${round(at(0.9), 1)}`;
}

function answers(reads: Reads): string {
  return Object.entries(reads.counts)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([status, count]) => `${status}: ${count}`)
    .join(', ');
}

async function stopped(server: ChildProcess): Promise<void> {
  if (server.exitCode !== null) return;
  server.kill('SIGTERM');
  await once(server, 'exit');
}

async function main(): Promise<void> {
  if (!REUSE) await docker.createNetwork({ Name: network, Labels: { 'bot-agent-bench': runId } });
  const gateway = ((await docker.getNetwork(network).inspect()) as { IPAM: { Config: Array<{ Gateway: string }> } }).IPAM.Config[0]?.Gateway ?? '';
  const ids = Array.from({ length: BOTS }, (_, i) => `bot_${i + 1}_1_${runId}`);
  if (!REUSE) {
    console.error(`making ${BOTS} bots on ${network} (gateway ${gateway})${KEEP ? `; kept after: BENCH_REUSE=${runId}` : ''}`);
    await makeBots(docker, ids, { image: TEST_IMAGE, network, benchLabel: runId });
  }
  const bots = await mapLimited(ids, 16, async (id) => ({ id, pid: (await docker.getContainer(id).inspect()).State.Pid }));
  const rows: string[] = [];
  const notes: string[] = [];
  /** The agent's CPU and its reads not answered 200, then bare node:http's CPU: the goals' figures. */
  const goals = { agentCpu: NaN, notOk: NaN, floorCpu: NaN };

  const profiling: Record<string, string> = PROFILE_DIR ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${PROFILE_DIR}` } : {};
  const { agent, port } = await agentProcess(profiling, SERVER_CORE);
  const agentPid = agent.pid ?? 0;
  try {
    // At rest: the bots made, none reading, the agent's start behind it.
    await new Promise((resolve) => setTimeout(resolve, 10_000));
    const restBefore = cpuSeconds(agentPid);
    await new Promise((resolve) => setTimeout(resolve, 20_000));
    const rest = ((cpuSeconds(agentPid) - restBefore) / 20) * 100;
    const seconds = WARM_S + MINUTES * 60;
    const engineBefore = enginePids().reduce((sum, pid) => sum + cpuSeconds(pid), 0);
    const measured = await windows(agentPid, WARM_S, botsRead(`${gateway}:${port}`, bots, seconds));
    const engine = ((enginePids().reduce((sum, pid) => sum + cpuSeconds(pid), 0) - engineBefore) / seconds) * 100;
    const { p50, p99 } = percentiles(measured.reads.times_ms);
    goals.agentCpu = round(median(measured.cpu), 1);
    goals.notOk = Object.entries(measured.reads.counts).reduce((sum, [status, count]) => (status === '200' ? sum : sum + count), 0);
    rows.push(
      `| the agent (defaults) | ${round(median(measured.cpu), 1)} | ${spread(measured.cpu)} | ${round(median(measured.system), 1)} | ${p50} | ${p99} | ${answers(measured.reads)} | ${round(measured.rss[0] ?? NaN, 1)} → ${round(measured.rss.at(-1) ?? NaN, 1)} |`,
    );
    notes.push(`The agent at rest with ${BOTS} bots: ${round(rest, 2)}% of a core. The engine (dockerd, containerd, shims) while the bots read: ${round(engine, 1)}%.`);
    for (const [status, sample] of Object.entries(measured.reads.samples)) {
      notes.push(`A read answered \`${status}\` (${measured.reads.counts[status]} in all): ${sample.bot}, ${sample.at_s} s in, body \`${sample.body.replaceAll('`', "'")}\`.`);
    }
    for (const failure of measured.reads.failures) {
      notes.push(
        `Failed on an open connection: ${failure.bot}, ${failure.at_s} s in, \`${failure.error}\`, after ${failure.answered_on_connection} answers on it, ` +
          `${failure.connection_age_s} s after it was opened, ${failure.idle_s} s after its last answer${failure.sent_again ? '; sent again on a new connection' : ''}.`,
      );
    }
    notes.push(`Reads sent again, their kept-alive connection closed by the server before any byte of answer: ${measured.reads.sent_again}.`);
    if (measured.reads.lags.length > 0) {
      notes.push(`The readers' own loop ran late by over a second: ${measured.reads.lags.map((lag) => `${lag.late_s} s at ${lag.at_s} s`).join(', ')}.`);
    }
    const restAfterStart = cpuSeconds(agentPid);
    await new Promise((resolve) => setTimeout(resolve, 20_000));
    notes.push(`The agent at rest again, 20 s after the reads: ${round(((cpuSeconds(agentPid) - restAfterStart) / 20) * 100, 2)}% of a core.`);
    const minutes = measured.rss.filter((_, i) => i % 6 === 5).map((mb) => round(mb, 1));
    if (minutes.length > 1) notes.push(`The agent's RSS at the end of each minute of reads (MB): ${minutes.join(', ')}.`);
  } finally {
    await stopped(agent);
  }

  for (const kind of (process.env.BENCH_BASELINES === '0' ? [] : ['node', 'koa', 'promises']) as BaselineKind[]) {
    const { server, port: baselinePort } = await baselineServer(kind, [], SERVER_CORE);
    try {
      const measured = await windows(server.pid ?? 0, WARM_S, botsRead(`${gateway}:${baselinePort}`, bots, WARM_S + BASELINE_S));
      const { p50, p99 } = percentiles(measured.reads.times_ms);
      if (kind === 'node') goals.floorCpu = round(median(measured.cpu), 1);
      rows.push(`| ${kind} (baseline) | ${round(median(measured.cpu), 1)} | ${spread(measured.cpu)} | ${round(median(measured.system), 1)} | ${p50} | ${p99} | ${answers(measured.reads)} | ${round(measured.rss.at(-1) ?? NaN, 1)} |`);
    } finally {
      await stopped(server);
    }
  }

  notes.push(
    `Goal, under ${CPU_GOAL}% of a core for the agent: ${goals.agentCpu}%, ${goals.agentCpu < CPU_GOAL ? 'met' : 'not met'}` +
      (Number.isFinite(goals.floorCpu) ? `; bare \`node:http\` took ${goals.floorCpu}% for the same reads` : '') +
      (goals.agentCpu < CPU_GOAL ? '' : ' (what stands in the way, its share and what would remove it: docs/performance.md, "Docker at 1,000 bots")') +
      `. Goal, every read answered 200: ${goals.notOk === 0 ? 'met' : `not met, ${goals.notOk} not 200`}.`,
  );
  const table = [
    `| server | CPU % of a core, median of ${WINDOW_S} s windows | middle 80% | of it the kernel's (system time) | p50 ms | p99 ms | answers | RSS MB, first → last window |`,
    '|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
  console.log(table);
  console.log(notes.join('\n'));
  writeSection(
    'docker-scale',
    [
      `## ${BOTS} bots on Docker, each reading its own stats once a second (\`npm run bench:docker-scale\`)`,
      '',
      `Made on ${new Date().toISOString().slice(0, 10)}: each bot's read from its own address (its container's network namespace), ` +
        `${FRESH ? 'a new connection each read' : 'one connection per bot kept alive between reads'}, bot n at n/${BOTS} of each second; ` +
        `the server pinned to one core, the readers (one Python process) to the other; ${WARM_S} s of warm-up left out; the agent read for ${MINUTES} min, each baseline for ${BASELINE_S} s.`,
      '',
      table,
      '',
      ...notes.map((note) => `- ${note}`),
    ].join('\n'),
  );
}

if (!KEEP) process.once('SIGINT', () => void removeEverything(runId, network, false).then(() => process.exit(130)));
try {
  await main();
} finally {
  if (!KEEP) await removeEverything(runId, network, true);
}
