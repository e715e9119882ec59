// npm run bench:kube-scale: two agents over one PostgreSQL, as the chart runs them with a database, against the
// local cluster's real API server with BENCH_KUBE_BOTS (5,000) bots on kwok's simulated node (scripts/kube/kwok.sh),
// a tenth of them crash-looping by kwok's stage. kwok runs no process and no probe: what this measures is the
// agent's lists, watches, caches, Leases and history at that scale, never the bots. Writes its section of
// BENCHMARKS.md, each figure beside its goal (docs/performance.md). BENCH_PROFILE_DIR: each agent's CPU profile;
// BENCH_HEAP_DIR: a heap snapshot of the second agent, taken after every figure.
import { execFileSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { AppsV1Api, CoreV1Api, PatchStrategy, setHeaderOptions, Watch } from '@kubernetes/client-node';
import type { V1Pod } from '@kubernetes/client-node';
import { webhookReceiver } from '../test/helpers/agent-process.js';
import { dropDatabases, freshDatabase } from '../test/helpers/postgres.js';
import { adminKubeConfig, agentKubeConfig, KWOK_CRASH_LABEL, kwokBotDeployment } from '../test/kube-cluster/cluster-harness.js';
import { mapLimited } from '../src/map-limited.js';
import { agentProcess } from './bench-agent.js';
import { tableFigures } from './bench-console.js';
import { cpuPercentDuring, machineBusyDuring, percentiles, round, rssMb, timedGet } from './bench-scale.js';
import { writeSection } from './bench-sections.js';

const BOTS = Number(process.env.BENCH_KUBE_BOTS ?? 5000);
const CRASHING = Math.floor(BOTS / 10);
/** Bots made crash-looping while the agents watch: the time each loop takes to be reported. */
const NEW_LOOPS = 20;
/** Bots made crash-looping at once afterwards: the events a second the stream and the webhooks carry. */
const BURST = Math.min(500, Math.floor(BOTS / 10));
const READS_PER_SECOND = 200;
const READ_SECONDS = 30;
const REST_SECONDS = 60;
/** How long nothing is kept or delivered before the agents count as at rest. */
const QUIET_MS = 15_000;
/** The pods whose crashes this process watches itself. */
const WATCHED_LABEL = 'bot-agent.bench/watched';
const SECRET = 'bench-webhook-secret-0123456789abcdef';
const runId = randomBytes(3).toString('hex');
const namespace = `scale-${runId}`;

const sh = (script: string, args: string[] = []): string =>
  execFileSync('bash', [script, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim().split('\n').at(-1) ?? '';
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const log = (line: string) => console.error(`bench:kube-scale: ${line}`);

/** Every event an agent's `GET /api/events` sends, each with the time it arrived here. */
function eventsOf(port: number): { events: Array<{ type: string; botId: string; at: number; exitAt?: number }>; close(): void } {
  const events: Array<{ type: string; botId: string; at: number; exitAt?: number }> = [];
  let pending = '';
  const request = http.get({ host: '127.0.0.1', port, path: '/api/events' }, (response) => {
    response.setEncoding('utf8');
    response.on('data', (chunk: string) => {
      pending += chunk;
      const blocks = pending.split('\n\n');
      pending = blocks.pop() ?? '';
      const at = Date.now();
      for (const block of blocks) {
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (!data) continue;
        const event = JSON.parse(data) as { type: string; bot_id: string; exit?: { at?: string } };
        const exitAt = event.exit?.at === undefined ? undefined : Date.parse(event.exit.at);
        events.push({ type: event.type, botId: event.bot_id, at, ...(exitAt === undefined ? {} : { exitAt }) });
      }
    });
  });
  request.on('error', () => undefined);
  return { events, close: () => request.destroy() };
}

/** An agent's own /metrics, as Prometheus reads them. */
async function metricsOf(port: number): Promise<string> {
  return (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
}

/** The runs ended an agent has kept in the history so far (its /metrics). */
async function exitsKept(port: number): Promise<number> {
  const text = await metricsOf(port);
  return [...text.matchAll(/^bot_agent_bot_exits_total\{[^}]*\} (\S+)$/gm)].reduce((sum, match) => sum + Number(match[1]), 0);
}

/**
 * Waits until neither agent keeps another run's end nor delivers another webhook for QUIET_MS (at most
 * 10 minutes): the crash burst's records written, so what is measured next is the agents at rest.
 * Answers how long after the call the last of them came.
 */
async function untilQuiet(agents: Agent[], delivered: () => number): Promise<number> {
  const started = Date.now();
  let [mark, movedAt] = ['', started];
  while (Date.now() - movedAt < QUIET_MS && Date.now() - started < 600_000) {
    const now = `${(await Promise.all(agents.map((agent) => exitsKept(agent.port)))).join()}:${delivered()}`;
    if (now !== mark) [mark, movedAt] = [now, Date.now()];
    await sleep(1_000);
  }
  return movedAt - started;
}

/** An agent's heap at this moment (MB), from its own /metrics (prom-client's figures of the process). */
async function heapOf(port: number): Promise<{ used: number; total: number; external: number }> {
  const text = await metricsOf(port);
  const mb = (name: string): number => round(Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN) / 1e6, 0);
  return { used: mb('nodejs_heap_size_used_bytes'), total: mb('nodejs_heap_size_total_bytes'), external: mb('nodejs_external_memory_bytes') };
}

interface Agent {
  process: ChildProcess;
  port: number;
  /** From its start to its first answer of /readyz: its watches' first lists of every Deployment and pod. */
  readyMs: number;
}

async function startAgent(name: string, env: Record<string, string>): Promise<Agent> {
  const started = Date.now();
  const { agent: child, port } = await agentProcess({ ...env, HOSTNAME: name });
  const ready = () => fetch(`http://127.0.0.1:${port}/readyz`).then((res) => res.ok, () => false);
  while (!(await ready())) await sleep(50);
  return { process: child, port, readyMs: Date.now() - started };
}

/** READS_PER_SECOND status reads for READ_SECONDS, spread evenly, over the agents in turn: their times and failures. */
async function reads(agents: Agent[], ids: string[]): Promise<{ times: number[]; readOf: string[]; failures: string[] }> {
  const pool = new http.Agent({ keepAlive: true, maxSockets: 64, scheduling: 'fifo' });
  const times: number[] = [];
  /** The bot each of `times` read. */
  const readOf: string[] = [];
  const failures: string[] = [];
  const pending: Array<Promise<void>> = [];
  const start = performance.now();
  for (let n = 0; n < READS_PER_SECOND * READ_SECONDS; n++) {
    const wait = start + (n * 1000) / READS_PER_SECOND - performance.now();
    if (wait > 1) await sleep(wait);
    const botId = ids[(n * 7919) % ids.length]!;
    const url = `http://127.0.0.1:${agents[n % agents.length]!.port}/api/bots/${botId}`;
    const timed = (ms: number): void => {
      times.push(ms);
      readOf.push(botId);
    };
    pending.push(timedGet(url, pool).then(timed, (err: Error) => void failures.push(err.message)));
  }
  await Promise.all(pending);
  pool.destroy();
  return { times, readOf, failures };
}

async function main(): Promise<void> {
  // The agents run built, as `npm start` and the image run them (scripts/bench-agent.ts): built before any is timed.
  execFileSync('npm', ['run', '--silent', 'build'], { stdio: 'inherit' });
  process.env.BOT_AGENT_KUBECONFIG = sh('scripts/kube/up.sh');
  const kwokNode = sh('scripts/kube/kwok.sh');
  process.env.BOT_AGENT_DATABASE_URL = sh('scripts/postgres.sh');
  const admin = adminKubeConfig();
  const apps = admin.makeApiClient(AppsV1Api);
  const core = admin.makeApiClient(CoreV1Api);
  const dir = mkdtempSync(join(tmpdir(), 'bench-kube-scale-'));
  const agents: Agent[] = [];
  try {
    const agentConfig = await agentKubeConfig(admin, namespace, { 'database.existingSecret': 'history-db' });
    writeFileSync(join(dir, 'kubeconfig'), agentConfig.exportConfig(), { mode: 0o600 });
    const ids = Array.from({ length: BOTS }, (_, i) => `bot_9_${i}_scale${runId}`);
    const crashing = new Set(ids.slice(0, CRASHING));

    log(`making ${BOTS} bots on ${kwokNode}`);
    let started = Date.now();
    await mapLimited(ids, 32, (id) => apps.createNamespacedDeployment({ namespace, body: kwokBotDeployment(id, crashing.has(id)) }));
    const createMs = Date.now() - started;
    const runningPods = async () =>
      (await core.listNamespacedPod({ namespace, fieldSelector: `spec.nodeName=${kwokNode}` })).items.filter((pod) => pod.status?.phase === 'Running');
    while ((await runningPods()).length < BOTS) await sleep(2_000);
    const allRunningMs = Date.now() - started;
    log(`made in ${createMs} ms, all running after ${allRunningMs} ms`);

    const hooks = await webhookReceiver(0, SECRET);
    const env = {
      AGENT_RUNTIME: 'kubernetes',
      KUBECONFIG: join(dir, 'kubeconfig'),
      AGENT_NAMESPACE: namespace,
      AGENT_DATABASE_URL: await freshDatabase(),
      AGENT_WATCHDOG: 'on',
      AGENT_RATE_LIMIT: '10000',
      AGENT_READ_RATE: '10000',
      AGENT_WEBHOOK_URL: hooks.url,
      AGENT_WEBHOOK_SECRET: SECRET,
    };
    // BENCH_PROFILE_DIR: each agent writes a CPU profile there when it ends (node --cpu-prof).
    // BENCH_HEAP_DIR: the second agent writes a heap snapshot there at the end (after every figure, so none is its).
    const nodeOptions = [
      ...(process.env.BENCH_PROFILE_DIR ? [`--cpu-prof --cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`] : []),
      ...(process.env.BENCH_HEAP_DIR ? [`--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${process.env.BENCH_HEAP_DIR}`] : []),
    ];
    const profiling: Record<string, string> = nodeOptions.length > 0 ? { NODE_OPTIONS: nodeOptions.join(' ') } : {};
    agents.push(await startAgent('scale-agent-a', { ...env, ...profiling }), await startAgent('scale-agent-b', { ...env, ...profiling }));
    const pids = () => agents.map((agent) => agent.process.pid!);
    const fleetUrl = `http://127.0.0.1:${agents[0]!.port}/api/console/fleet`;
    started = Date.now();
    // A first answer that fails is a figure too (once, the connection closed 2 MB into it): said, the run goes on.
    const firstTable = await fetch(fleetUrl)
      .then((res) => res.arrayBuffer())
      .then(
        (body) => `${Date.now() - started} ms, ${round(body.byteLength / 1024, 1)} KB`,
        (err: Error) => `failed after ${Date.now() - started} ms: ${err.message}${err.cause instanceof Error ? ` (${err.cause.message})` : ''}`,
      );

    // The crashing tenth comes to rest after its fifth crash (scripts/kube/kwok-stages.yaml).
    const settled = async () => (await runningPods()).filter((pod) => crashing.has(pod.metadata?.labels?.['bot-agent/bot-id'] ?? '') && (pod.status?.containerStatuses?.[0]?.restartCount ?? 0) < 5).length === 0;
    while (!(await settled())) await sleep(2_000);
    const settledMs = Date.now() - started;
    const writtenAfterMs = await untilQuiet(agents, () => hooks.received.length);
    log('at rest');
    const restCpu = await cpuPercentDuring(pids, () => sleep(REST_SECONDS * 1000));
    const restRss = pids().map(rssMb);
    const restHeaps = await Promise.all(agents.map((agent) => heapOf(agent.port)));

    log(`${READS_PER_SECOND} status reads a second`);
    let read: { times: number[]; failures: string[] } = { times: [], failures: [] };
    const readCpu = await cpuPercentDuring(pids, async () => {
      read = await reads(agents, ids);
    });

    // New crash loops: the moment this process's own watch sees a pod's third crash, against the moment the
    // crash-looping event arrives on an agent's stream (both clocks this process's).
    const stream = eventsOf(agents[1]!.port);
    const thirdCrashSeen = new Map<string, number>();
    const watch = await new Watch(admin).watch(
      `/api/v1/namespaces/${namespace}/pods`,
      { labelSelector: `${WATCHED_LABEL}=yes` },
      (_type: string, pod: V1Pod) => {
        const id = pod.metadata?.labels?.['bot-agent/bot-id'];
        if (id && (pod.status?.containerStatuses?.[0]?.restartCount ?? 0) >= 3 && !thirdCrashSeen.has(id)) thirdCrashSeen.set(id, Date.now());
      },
      () => undefined,
    );
    const steady = ids.filter((id) => !crashing.has(id));
    const crashNow = async (batch: string[], labels: Record<string, string> = {}) => {
      const pods = (await runningPods()).filter((pod) => batch.includes(pod.metadata?.labels?.['bot-agent/bot-id'] ?? ''));
      await mapLimited(pods, 16, (pod) =>
        core.patchNamespacedPod(
          { name: pod.metadata!.name!, namespace, body: { metadata: { labels: { [KWOK_CRASH_LABEL]: 'true', ...labels } } } },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        ),
      );
    };
    const newLoops = steady.slice(0, NEW_LOOPS);
    await crashNow(newLoops, { [WATCHED_LABEL]: 'yes' });
    const loopReported = async () => newLoops.every((id) => stream.events.some((event) => event.type === 'crash-looping' && event.botId === id));
    started = Date.now();
    while (!(await loopReported()) && Date.now() - started < 120_000) await sleep(200);
    watch.abort();
    const reportLags = newLoops.map((id) => {
      const reported = stream.events.find((event) => event.type === 'crash-looping' && event.botId === id)?.at;
      const seen = thirdCrashSeen.get(id);
      return reported !== undefined && seen !== undefined ? reported - seen : NaN;
    });

    // A burst: BURST bots crash five times each at once, while status reads go on. Each crash is timed from its
    // end as the cluster recorded it (the container's finishedAt, in whole seconds: up to a second early) to its
    // `exited` event on the stream.
    log(`a burst of ${BURST} crash loops`);
    const burst = steady.slice(NEW_LOOPS, NEW_LOOPS + BURST);
    const [streamBefore, hooksBefore] = [stream.events.length, hooks.received.length];
    // Each scrape of an agent's /metrics begins its event loop's delay figures afresh (prom-client): these say the burst's.
    await Promise.all(agents.map((agent) => metricsOf(agent.port)));
    started = Date.now();
    let burstReads: { times: number[]; readOf: string[]; failures: string[] } = { times: [], readOf: [], failures: [] };
    // The agents' CPU through the burst's reads, and the whole machine's (the cluster, kwok and PostgreSQL share it).
    let burstCpu = { agents: NaN, machine: NaN };
    const burstReading = machineBusyDuring(() => cpuPercentDuring(pids, async () => void (burstReads = await reads(agents, ids)))).then(
      ({ value, busyPercent }) => void (burstCpu = { agents: value / agents.length, machine: busyPercent }),
    );
    await crashNow(burst);
    // Done once each bot's loop is reported and its five ends are on the stream.
    const burstDone = () => {
      const ends = new Map<string, number>();
      for (const event of stream.events.slice(streamBefore)) if (event.type === 'exited') ends.set(event.botId, (ends.get(event.botId) ?? 0) + 1);
      return burst.every((id) => (ends.get(id) ?? 0) >= 5 && stream.events.some((event) => event.type === 'crash-looping' && event.botId === id));
    };
    while (!burstDone() && Date.now() - started < 300_000) await sleep(500);
    await sleep(5_000);
    await burstReading;
    const loopDelays = await Promise.all(
      agents.map(async (agent) => {
        const text = await metricsOf(agent.port);
        const ms = (name: string): number => round(Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN) * 1000, 0);
        return `p99 ${ms('nodejs_eventloop_lag_p99_seconds')} ms, longest ${ms('nodejs_eventloop_lag_max_seconds')} ms`;
      }),
    );
    const streamEvents = stream.events.slice(streamBefore);
    const burstSeconds = ((streamEvents.at(-1)?.at ?? started) - started) / 1000;
    const hookCount = hooks.received.length - hooksBefore;
    stream.close();
    const inBurst = new Set(burst);
    const exitLags = streamEvents.flatMap((event) => (event.type === 'exited' && inBurst.has(event.botId) && event.exitAt !== undefined ? [event.at - event.exitAt] : []));
    const exitLag = percentiles(exitLags);
    const burstReadFigures = percentiles(burstReads.times);
    // Reads of the burst's own bots, whose records change with each of their events, apart from the others'.
    const ofBurst = percentiles(burstReads.times.filter((_, n) => inBurst.has(burstReads.readOf[n]!)));
    const ofOthers = percentiles(burstReads.times.filter((_, n) => !inBurst.has(burstReads.readOf[n]!)));

    log('the console');
    // The page not drawn in time is a figure too: said in the table, the figures before it kept.
    const table = await tableFigures(`http://127.0.0.1:${agents[0]!.port}`).catch((err: Error) => {
      const failed = `failed: ${err.message.split('\n')[0]}`;
      return { answerMs: failed, answerKb: NaN, drawMs: failed, frames: failed, frameP50: NaN, frameP95: NaN, frameMax: NaN, slowFrames: NaN };
    });

    const readFigures = percentiles(read.times);
    const lag = percentiles(reportLags.filter(Number.isFinite));
    const body = [
      '## Kubernetes at 5,000 bots',
      '',
      `Made by \`npm run bench:kube-scale\` on ${new Date().toISOString().slice(0, 10)} (2 cores): ${BOTS} bot Deployments on kwok's simulated node beside the local cluster's real API server, ` +
        `${CRASHING} of them crash-looping by kwok's stage (five crashes 3 s apart, then at rest), two agents over one PostgreSQL with webhooks on, each built and run as \`npm start\` runs it (the image's Node flags). ` +
        'kwok runs no process and no probe: the agents list, watch, cache and record as at that scale, the bots cost nothing.',
      '',
      '| what | figure | goal |',
      '|---|---|---|',
      `| ${BOTS} Deployments made (32 at once) / all their pods running | ${round(createMs / 1000, 1)} s / ${round(allRunningMs / 1000, 1)} s | |`,
      `| an agent's first full list: from its start to ready (every Deployment and pod listed and watched) | ${agents.map((a) => round(a.readyMs / 1000, 1)).join(' s, ')} s | |`,
      `| the console's table, first answer | ${firstTable} | |`,
      `| the crashing tenth at rest (its fifth crash) / its last end kept and webhook delivered, after that | ${round(settledMs / 1000, 1)} s after both agents were ready / ${round(writtenAfterMs / 1000, 1)} s | |`,
      `| memory of each agent at rest (RSS) | ${restRss.map((mb) => round(mb, 0)).join(' MB, ')} MB | under 300 MB each |`,
      `| of it, each agent's JavaScript heap: used / held, and memory outside it (buffers, strings of C++) | ${restHeaps.map(({ used, total, external }) => `${used} / ${total}, ${external}`).join(' MB; ')} MB | |`,
      `| CPU of both agents at rest (nothing kept or delivered for ${QUIET_MS / 1000} s before), ${REST_SECONDS} s | ${round(restCpu / agents.length, 2)}% of a core each | under 5% |`,
      `| a status read while ${READS_PER_SECOND} a second go on for ${READ_SECONDS} s, over both agents | p50 ${readFigures.p50} ms, p99 ${readFigures.p99} ms; ${read.failures.length} of ${READS_PER_SECOND * READ_SECONDS} not 200 | p99 under 50 ms |`,
      `| CPU of both agents under those reads | ${round(readCpu / agents.length, 1)}% of a core each | |`,
      `| a new crash loop reported: from the third crash seen by a watch to the \`crash-looping\` event on the stream, ${NEW_LOOPS} bots | p50 ${lag.p50} ms, p99 ${lag.p99} ms; ${reportLags.filter((ms) => !Number.isFinite(ms)).length} not reported | within 2 s |`,
      `| ${BURST} bots crash five times at once: events through one agent's stream | ${streamEvents.length} in ${round(burstSeconds, 1)} s, ${round(streamEvents.length / Math.max(burstSeconds, 0.001), 0)} a second | |`,
      `| the same through the webhooks (both agents deliver, each event once) | ${hookCount} delivered by then | |`,
      `| each of the burst's ${BURST * 5} crashes: from its end (the container's finishedAt, whole seconds) to its \`exited\` event on the stream | ${exitLags.length} timed: p50 ${exitLag.p50} ms, p99 ${exitLag.p99} ms, slowest ${round(Math.max(...exitLags), 0)} ms | within 5 s |`,
      `| a status read while ${READS_PER_SECOND} a second go on through the burst (${READ_SECONDS} s), over both agents | p50 ${burstReadFigures.p50} ms, p99 ${burstReadFigures.p99} ms; ${burstReads.failures.length} of ${READS_PER_SECOND * READ_SECONDS} not 200 | p99 under 50 ms |`,
      `| of them, reads of the burst's own bots / of the others | p50 ${ofBurst.p50} ms, p99 ${ofBurst.p99} ms / p50 ${ofOthers.p50} ms, p99 ${ofOthers.p99} ms | |`,
      `| each agent's event loop through the burst: how late its timers ran | ${loopDelays.join('; ')} | |`,
      `| CPU through those reads: of both agents / of the whole machine (${cpus().length} cores) | ${round(burstCpu.agents, 1)}% of a core each / ${round(burstCpu.machine, 0)}% busy | |`,
      `| the console's table with ${BOTS} rows: answer, p50 of 5 | ${table.answerMs} ms, ${table.answerKb} KB | |`,
      `| from opening the page to the table drawn, p50 of 5 (Chromium) | ${table.drawMs} ms | |`,
      `| frames while scrolling to the end and back | ${table.frames}: p50 ${table.frameP50} ms, p95 ${table.frameP95} ms, slowest ${table.frameMax} ms, ${table.slowFrames} over 50 ms | |`,
    ].join('\n');
    console.log(writeSection('kube-scale', body));
    if (process.env.BENCH_HEAP_DIR) {
      const heapDir = process.env.BENCH_HEAP_DIR;
      const before = new Set(readdirSync(heapDir));
      agents[1]!.process.kill('SIGUSR2');
      // Written as it is walked: done once its size has stood still for 3 s.
      const size = (): number => readdirSync(heapDir).filter((file) => !before.has(file)).reduce((sum, file) => sum + statSync(join(heapDir, file)).size, 0);
      for (let last = -1, still = 0, waited = 0; still < 3 && waited < 300; waited++) {
        await sleep(1_000);
        const now = size();
        still = now > 0 && now === last ? still + 1 : 0;
        last = now;
      }
      log(`heap snapshot of scale-agent-b in ${heapDir}`);
    }
    if (read.failures.length > 0) log(`reads not answered 200, e.g. ${read.failures.slice(0, 3).join('; ')}`);
  } finally {
    for (const agent of agents) agent.process.kill('SIGTERM');
    await core.deleteNamespace({ name: namespace }).catch(() => undefined);
    await dropDatabases().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
// The webhook receiver and pooled connections would hold the process open.
process.exit(0);
