// npm run bench [-- --bots N]: the agent against the real Docker engine with 5 and
// then N (100 unless given) idle labelled busybox bots, next to the raw engine call
// for each operation, a bare node:http server, koa with @koa/router alone and koa keeping the agent's
// per-request promises (scripts/bench-baselines.ts); at N bots, every bot read at once,
// then once a second for a minute (the agent's and the engine's CPU against a quiet
// half-minute), and a burst of 100 starts; then, on the real cluster (npm run
// kube:up), the API server requests per warm call. Writes BENCHMARKS.md and
// BENCHMARKS.json; removes every container it made, also when interrupted.
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import http from 'node:http';
import { cpus, tmpdir, totalmem } from 'node:os';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import Docker from 'dockerode';
import pg from 'pg';
import { kubernetesCosts } from './bench-kube.js';
import type { KubeCallCost } from './bench-kube.js';
import type { Availability } from './bench-ha.js';
import { baselineServer } from './bench-baselines.js';
import type { Baseline } from './bench-baselines.js';
import { perRequest, profileOf, STAGE_ORDER, stagesOf } from './bench-profile.js';
import { allAtOnce, cpuPercentDuring, enginePids, makeBots, percentiles, post, readEachSecond, removeEverything, round, rssMb, timed } from './bench-scale.js';
import type { Figures } from './bench-scale.js';
import { SocketProxy } from '../test/helpers/socket-proxy.js';
import { ownSections } from './bench-sections.js';
import { agentProcess } from './bench-agent.js';

const TEST_IMAGE = 'bot-agent-testbot:latest';
/** The phase (bot count) in which one bot floods the agent with reads. */
const FLOOD_PHASE = 5;
const { values: options } = parseArgs({ options: { bots: { type: 'string', default: '100' } } });
const LARGE = Number(options.bots);
if (!Number.isInteger(LARGE) || LARGE < 20 || LARGE > 2000) throw new Error(`--bots must be a whole number from 20 to 2000, got ${options.bots}`);
/** How long every bot is read once a second, and how long the quiet stretch before it lasts. */
const STEADY_S = 60;
const QUIET_S = 30;
/** How long the bare server is read at the same rate, for the floor of a lone request's CPU. */
const BARE_S = 20;
/** How many stopped bots are started at once in the burst. */
const BURST = 100;
const runId = randomBytes(3).toString('hex');
const docker = new Docker({ socketPath: '/var/run/docker.sock' });
const network = `bot-agent-bench-${runId}`;
const burstNetwork = `${network}-burst`;
const bots: string[] = [];


/** The error message of one of the agent's log lines (pino's JSON); the line itself should it not parse. */
function loggedError(line: string): string {
  try {
    return String((JSON.parse(line) as { err?: { message?: string } }).err?.message ?? line);
  } catch {
    return line;
  }
}

async function addBots(count: number): Promise<void> {
  const ids = Array.from({ length: count - bots.length }, (_, i) => `bot_${bots.length + i + 1}_1_bench${runId}`);
  await makeBots(docker, ids, { image: TEST_IMAGE, network, benchLabel: runId });
  bots.push(...ids);
}

/**
 * A client that times 500 logs calls (tail=100) after 50 to warm up, one at a
 * time on one connection, and prints their p50 and p99 as JSON: the same code
 * from inside a bot container and from this host, each in a fresh process.
 * Inside the container it first prints 200 lines, so that it reads back as much
 * as the host's run reads of an idle bot.
 */
const LOGS_LOOP = `
    if (process.env.PRINT_LINES) for (let i = 1; i <= 200; i++) console.log(i);
    const http = require('http'); const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const body = JSON.stringify({ bot_id: process.env.BOT_ID, lines: 100 }); const times = [];
    const stats = process.env.CALL === 'stats';
    const one = () => new Promise((resolve, reject) => { const t = process.hrtime.bigint();
      http.request({ host: process.env.AGENT, port: process.env.PORT, agent,
        ...(stats ? { path: '/api/bots/' + process.env.BOT_ID + '/stats', method: 'GET' } : { path: '/api/bots/logs', method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }) }, (r) => { r.resume();
        r.on('end', () => r.statusCode === 200 ? (times.push(Number(process.hrtime.bigint() - t) / 1e6), resolve()) : reject(new Error('HTTP ' + r.statusCode))); })
      .on('error', reject).end(stats ? undefined : body); });
    (async () => { for (let i = 0; i < 50; i++) await one(); times.length = 0; for (let i = 0; i < 500; i++) await one();
      times.sort((a, b) => a - b); console.log(JSON.stringify({ p50: times[250], p99: times[495] })); })()
      .catch((e) => console.log(JSON.stringify({ error: e.message })));`;

/** How many calls LOGS_LOOP makes in all, its 50 of warm-up included. */
const LOGS_LOOP_CALLS = 550;

/** The figures LOGS_LOOP printed. */
function loopFigures(out: string): Figures {
  const result = JSON.parse(out.slice(out.indexOf('{'), out.lastIndexOf('}') + 1)) as Figures & { error?: string };
  if (result.error) throw new Error(`the logs loop failed: ${result.error}`);
  return { p50: round(result.p50), p99: round(result.p99) };
}

/** A started bot container that runs `script` in node (the stand-in base image), with BOT_ID and `env`. */
async function nodeBot(id: string, script: string, env: Record<string, string>): Promise<Docker.Container> {
  const container = await docker.createContainer({
    name: id,
    Image: execFileSync('bash', ['scripts/node-base-image.sh'], { encoding: 'utf8' }).trim(),
    Cmd: ['node', '-e', script],
    Env: [`BOT_ID=${id}`, ...Object.entries(env).map(([name, value]) => `${name}=${value}`)],
    Labels: { 'bot-agent/bot-id': id, 'bot-agent/user-id': 'user_1', 'bot-agent-bench': runId },
    HostConfig: { NetworkMode: network },
  });
  await container.start();
  return container;
}

/** p50/p99 of logs (or its own stats) calls made from inside a bot container (node, from the stand-in base image) to the server at `port`. */
async function fromBotContainer(port: number, gateway: string, phase: number, call: 'logs' | 'stats' = 'logs', name: string = call): Promise<Figures> {
  const container = await nodeBot(`bot_9_${phase}_${name}${runId}`, LOGS_LOOP, { AGENT: gateway, PORT: String(port), PRINT_LINES: '1', CALL: call });
  await container.wait();
  return loopFigures((await container.logs({ stdout: true, stderr: true, follow: false })).toString('utf8'));
}

/**
 * A bot that prints 10,000 lines, then reads all of them back in 8 parallel
 * loops for FLOOD_S seconds, as fast as the agent answers (429s included), and
 * prints how many reads were answered and how many refused.
 */
const FLOOD = `
    for (let i = 1; i <= 10000; i++) console.log('flood line ' + i);
    const http = require('http'); const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    const body = JSON.stringify({ bot_id: process.env.BOT_ID, lines: 10000 }); const seen = { ok: 0, refused: 0 };
    const until = Date.now() + Number(process.env.FLOOD_S) * 1000; console.error('flooding');
    const one = () => new Promise((resolve) => http.request({ host: process.env.AGENT, port: process.env.PORT, path: '/api/bots/logs',
      method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (r) => { r.resume(); r.on('end', () => { r.statusCode === 200 ? seen.ok++ : seen.refused++; resolve(); }); }).on('error', resolve).end(body));
    const loop = async () => { while (Date.now() < until) await one(); };
    Promise.all(Array.from({ length: 8 }, loop)).then(() => console.log(JSON.stringify(seen)));`;

/** The platform's logs calls of `botId` through the agent at `port`, timed by LOGS_LOOP in a fresh process. */
function platformLogs(port: number, botId: string): Figures {
  return loopFigures(
    execFileSync(process.execPath, ['-e', LOGS_LOOP], { env: { ...process.env, BOT_ID: botId, AGENT: '127.0.0.1', PORT: String(port) }, encoding: 'utf8' }),
  );
}

interface Flood {
  /** The platform's logs calls of a quiet bot, before the flood. */
  quiet: Figures;
  /** The same calls while another bot floods the agent with reads of its own 10,000-line logs. */
  flooded: Figures;
  floodOk: number;
  floodRefused: number;
  /** The same calls during the hostile mix of issue 22, and what it made of the agent. */
  hostile: Figures;
  hostileReadsOk: number;
  hostileReadsRefused: number;
  /** The agent process's peak RSS once the mix is over, in MB. */
  hostilePeakRssMb: number;
}

/** The flood, against an agent of its own with the contract's default limits. */
async function underFlood(gateway: string, quietBot: string): Promise<Flood> {
  const { agent, port: agentPort } = await agentProcess({});
  try {
    const quiet = platformLogs(agentPort, quietBot);
    const flooded = await flood(agentPort, gateway, quietBot);
    return { quiet, ...flooded, ...(await hostileMix(agent, agentPort, quietBot)) };
  } finally {
    agent.kill('SIGTERM');
  }
}

async function flood(agentPort: number, gateway: string, quietBot: string): Promise<Pick<Flood, 'flooded' | 'floodOk' | 'floodRefused'>> {
  const container = await nodeBot(`bot_9_99_flood${runId}`, FLOOD, { AGENT: gateway, PORT: String(agentPort), FLOOD_S: '15' });
  const flooding = async () => (await container.logs({ stdout: false, stderr: true, follow: false })).toString().includes('flooding');
  for (let i = 0; i < 100 && !(await flooding()); i++) await new Promise((resolve) => setTimeout(resolve, 100));
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const flooded = platformLogs(agentPort, quietBot);
  await container.wait();
  const out = (await container.logs({ stdout: true, stderr: false, follow: false, tail: 1 })).toString('utf8');
  const seen = JSON.parse(out.slice(out.indexOf('{'), out.lastIndexOf('}') + 1)) as { ok: number; refused: number };
  await container.remove({ force: true });
  return { flooded, floodOk: seen.ok, floodRefused: seen.refused };
}

/**
 * The hostile mix (issue 22) against the platform's reads of a quiet bot: a bot crash-looping on
 * output that JSON inflates six times (100 lines of 42,000 \\x01 bytes a run), 40 parallel
 * 10,000-line reads of it, and 200 event streams nobody reads.
 */
async function hostileMix(agent: ChildProcess, agentPort: number, quietBot: string) {
  const base = `http://127.0.0.1:${agentPort}`;
  const id = `bot_9_98_hostile${runId}`;
  const script = "i=0; while [ $i -lt 100 ]; do head -c 42000 /dev/zero | tr '\\000' '\\001'; echo; i=$((i+1)); done; exit 3";
  const container = await docker.createContainer({
    name: id,
    Image: TEST_IMAGE,
    Cmd: ['sh', '-c', script],
    Labels: { 'bot-agent/bot-id': id, 'bot-agent/user-id': 'user_1', 'bot-agent-bench': runId },
    HostConfig: { NetworkMode: network, RestartPolicy: { Name: 'on-failure' } },
  });
  await container.start();
  const exits = async () => ((await (await fetch(`${base}/api/bots/${id}/exits?limit=50`)).json()) as { exits?: unknown[] }).exits?.length ?? 0;
  for (let i = 0; i < 120 && (await exits()) < 3; i++) await new Promise((resolve) => setTimeout(resolve, 500));
  const streams = await Promise.all(
    Array.from({ length: 200 }, () => new Promise<http.ClientRequest>((resolve) => {
      const req = http.get(`${base}/api/events`, (res) => {
        res.pause();
        resolve(req);
      });
      req.on('error', () => resolve(req));
    })),
  );
  const body = JSON.stringify({ bot_id: id, lines: 10_000 });
  const reads = Array.from({ length: 40 }, () =>
    fetch(`${base}/api/bots/logs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then(async (reply) => {
      await reply.arrayBuffer();
      return reply.status;
    }),
  );
  await new Promise((resolve) => setTimeout(resolve, 500));
  const hostile = platformLogs(agentPort, quietBot);
  const statuses = await Promise.all(reads);
  for (const stream of streams) stream.destroy();
  const hostilePeakRssMb = round(peakRss(agent), 1);
  await container.remove({ force: true });
  return {
    hostile,
    hostileReadsOk: statuses.filter((status) => status === 200).length,
    hostileReadsRefused: statuses.filter((status) => status !== 200).length,
    hostilePeakRssMb,
  };
}

async function load(url: string, options: Partial<autocannon.Options>): Promise<Figures> {
  const result = await autocannon({ url, ...options });
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return { p50: result.latency.p50, p99: result.latency.p99, rps: Math.round(result.requests.average) };
}

function peakRss(agent: ChildProcess): number {
  const status = readFileSync(`/proc/${agent.pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0) / 1024;
}

async function measure(count: number, base: string, agentPort: number, gateway: string) {
  const [first = '', second = '', third = ''] = bots;
  const cold: number[] = [];
  for (const id of bots.slice(-3)) cold.push(...(await timed(1, () => fetch(`${base}/api/bots/${id}/stats`))));
  // Warm-up first (the JIT, the stream, connection pools); only then the measured run.
  await load(`${base}/api/bots/${first}/stats`, { connections: 50, duration: 2 });
  const statsWarm = await load(`${base}/api/bots/${first}/stats`, { connections: 50, duration: 5 });
  // The same load on the baselines answering a stats-sized JSON, in the same run.
  const bareStats = await load(`${bare.base}/api/bots/${first}/stats`, { connections: 50, duration: 5 });
  const koaStats = await load(`${bareKoa.base}/api/bots/${first}/stats`, { connections: 50, duration: 5 });
  const promisesStats = await load(`${promised.base}/api/bots/${first}/stats`, { connections: 50, duration: 5 });
  const rawStats = percentiles(await timed(3, () => docker.getContainer(first).stats({ stream: false })));
  const rawStatsOneShot = percentiles(await timed(3, () => docker.getContainer(first).stats({ stream: false, 'one-shot': true })));
  // Timed by LOGS_LOOP in a process of its own, as from a bot container below:
  // autocannon rounds latencies to whole milliseconds.
  const logs = platformLogs(agentPort, second);
  const promisesLogs = platformLogs(promised.port, second);
  const rawLogs = percentiles(
    await timed(1000, () => docker.getContainer(second).logs({ stdout: true, stderr: true, tail: 100, follow: false })),
  );
  const fromBot = await fromBotContainer(agentPort, gateway, count);
  const statsFromBot = await fromBotContainer(agentPort, gateway, count, 'stats');
  // The same calls to the bare server, over the same network path: what the machine at this bot count costs any server.
  const bareFromBot = await fromBotContainer(bare.port, gateway, count, 'stats', 'bare');
  const flooded = count === FLOOD_PHASE ? await underFlood(gateway, second) : undefined;
  // Taken in turns on the same bot, so that the engine's drift weighs on both alike.
  const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const restarts: number[] = [];
  const rawRestarts: number[] = [];
  for (let i = 0; i < 10; i++) {
    restarts.push(...(await timed(1, () => post(base, '/api/bots/restart', JSON.stringify({ bot_id: third, user_id: 'user_1' }), keepAlive))));
    rawRestarts.push(...(await timed(1, () => docker.getContainer(third).restart())));
  }
  const restart = percentiles(restarts);
  const rawRestart = percentiles(rawRestarts);
  return { bots: count, statsWarm, bare: bareStats, koa: koaStats, promises: promisesStats, promisesLogs, statsCold: percentiles(cold), rawStats, rawStatsOneShot, logs, rawLogs, fromBot, statsFromBot, bareFromBot, flooded, restart, rawRestart };
}

/** Warm status reads (GET /api/bots/{id}: the bot's exit record, crash loop and crash count) with the history in each store. */
interface HistoryBackends {
  readonly sqlite: Figures;
  readonly postgres: Figures;
}

/**
 * The same status reads, 50 connections for 5 s, of the agent with its SQLite history and of a second agent
 * with its history in PostgreSQL (Debian's, started by scripts/postgres.sh, a database of its own): what the
 * database mode costs per request.
 */
async function historyBackends(base: string, botId: string): Promise<HistoryBackends> {
  const serverUrl = execFileSync('bash', ['scripts/postgres.sh'], { encoding: 'utf8' }).trim().split('\n').at(-1) ?? '';
  const name = `bench_${runId}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const { agent, port } = await agentProcess({ AGENT_RATE_LIMIT: '10000', AGENT_READ_RATE: '10000', AGENT_DATABASE_URL: url.toString() });
  try {
    const status = (at: string) => `${at}/api/bots/${botId}`;
    await load(status(base), { connections: 50, duration: 2 });
    const sqlite = await load(status(base), { connections: 50, duration: 5 });
    const pgBase = `http://127.0.0.1:${port}`;
    await load(status(pgBase), { connections: 50, duration: 2 });
    const postgres = await load(status(pgBase), { connections: 50, duration: 5 });
    return { sqlite, postgres };
  } finally {
    agent.kill('SIGTERM');
    await once(agent, 'exit');
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

let bare: Baseline;
let bareKoa: Baseline;
/** koa with @koa/router keeping the agent's per-request promises (a request id, the caller, metrics, the access line) and nothing else. */
let promised: Baseline;

/** Resolves once the agent at `port` holds at least `count` bots in its index (read from its metrics). */
async function indexedAll(port: number, count: number): Promise<void> {
  const indexed = async (): Promise<number> =>
    Number(/^bot_agent_indexed_bots (\d+)$/m.exec(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text())?.[1] ?? 0);
  const deadline = Date.now() + 120_000;
  while ((await indexed()) < count) {
    if (Date.now() > deadline) throw new Error(`the agent's index never held the ${count} bots`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/**
 * At LARGE bots, on an agent of its own (so that its RSS is this load's, not the autocannon runs'): every
 * bot read at once for the first time, a quiet stretch, a minute of reads once a second each, and a burst of starts.
 */
async function atScale() {
  const { agent, port } = await agentProcess({ AGENT_RATE_LIMIT: '10000', AGENT_READ_RATE: '10000' });
  try {
    await indexedAll(port, bots.length);
    return await scaleOn(agent, `http://127.0.0.1:${port}`);
  } finally {
    agent.kill('SIGTERM');
  }
}

async function scaleOn(agent: ChildProcess, base: string) {
  const unread = bots;
  const firstReadOfAllMs = round(await allAtOnce(base, unread));
  const agentPid = (): number[] => [agent.pid ?? 0];
  const quiet = { agent: 0, engine: 0 };
  const idle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, QUIET_S * 1000));
  [quiet.agent, quiet.engine] = await Promise.all([cpuPercentDuring(agentPid, idle), cpuPercentDuring(enginePids, idle)]);
  let peakRssMb = 0;
  const sampler = setInterval(() => (peakRssMb = Math.max(peakRssMb, rssMb(agent.pid ?? 0))), 1000);
  let times: number[] = [];
  const reading = async (): Promise<void> => void (times = await readEachSecond(base, bots, STEADY_S));
  const [readingAgent, readingEngine] = await Promise.all([cpuPercentDuring(agentPid, reading), cpuPercentDuring(enginePids, () => new Promise((resolve) => setTimeout(resolve, STEADY_S * 1000)))]).finally(
    () => clearInterval(sampler),
  );
  const steady = percentiles(times);
  // The floors: the baselines answering the same lone requests, at the same rate, on the same machine.
  const cpuOf = ({ server, base: at }: Baseline): Promise<number> =>
    cpuPercentDuring(() => [server.pid ?? 0], async () => void (await readEachSecond(at, bots, BARE_S)));
  const bareCpu = await cpuOf(bare);
  const koaCpu = await cpuOf(bareKoa);
  const promisesCpu = await cpuOf(promised);
  const burst = await startBurst();
  return {
    firstReadOfAll: { bots: unread.length, ms: firstReadOfAllMs },
    quiet: { agentCpu: round(quiet.agent, 1), engineCpu: round(quiet.engine, 1) },
    steady: { reads: times.length, p50: steady.p50, p99: steady.p99, agentCpu: round(readingAgent, 1), bareCpu: round(bareCpu, 1), koaCpu: round(koaCpu, 1), promisesCpu: round(promisesCpu, 1), engineCpu: round(readingEngine, 1), agentRssMb: round(peakRssMb, 1) },
    burst,
  };
}

/** How long a profiled server is read before its profile counts: every bot's first read, and the JIT. */
const PROFILE_WARM_S = 5;

/** CPU per request, stage by stage, from a profile (scripts/bench-profile.ts). */
interface Stages {
  readonly requests: number;
  /** Microseconds per request, per stage, in STAGE_ORDER. */
  readonly perRequest: Record<string, number>;
}

/** When `run` ran, on V8's profile clock (CLOCK_MONOTONIC, µs), and how many requests it made. */
async function timeWindow(run: () => Promise<number>): Promise<{ fromUs: number; toUs: number; requests: number }> {
  const fromUs = Number(process.hrtime.bigint() / 1000n);
  const requests = await run();
  return { fromUs, toUs: Number(process.hrtime.bigint() / 1000n), requests };
}

/** Stops a profiled server and reads its profile over each window. */
async function stagesAfterExit(server: ChildProcess, dir: string, windows: Array<{ fromUs: number; toUs: number; requests: number }>): Promise<Stages[]> {
  const exited = once(server, 'exit');
  server.kill('SIGTERM');
  await exited;
  const profile = profileOf(dir, server.pid ?? 0);
  return windows.map(({ fromUs, toUs, requests }) => ({ requests, perRequest: perRequest(stagesOf(profile, fromUs, toUs), requests) }));
}

/**
 * Where a warm request's CPU goes: the agent, koa with @koa/router alone and koa keeping the agent's
 * per-request promises, each under `node --cpu-prof` in a process of its own, answering the same reads
 * (every bot's stats once a second); the agent and the promises baseline also answering the platform's
 * logs calls. Profiled apart from every timed figure, which profiling would slow.
 */
async function whereCpuGoes(): Promise<{ stats: Stages; koa: Stages; logs: Stages; promises: Stages; promisesLogs: Stages }> {
  const dir = mkdtempSync(join(tmpdir(), 'bot-agent-bench-profile-'));
  const profiling = ['--cpu-prof', `--cpu-prof-dir=${dir}`];
  try {
    const { agent, port } = await agentProcess({ AGENT_RATE_LIMIT: '10000', AGENT_READ_RATE: '10000', NODE_OPTIONS: profiling.join(' ') });
    const base = `http://127.0.0.1:${port}`;
    await indexedAll(port, bots.length);
    await readEachSecond(base, bots, PROFILE_WARM_S);
    const statsWindow = await timeWindow(async () => (await readEachSecond(base, bots, BARE_S)).length);
    platformLogs(port, bots[1] ?? '');
    const logsWindow = await timeWindow(async () => (platformLogs(port, bots[1] ?? ''), LOGS_LOOP_CALLS));
    const [stats, logs] = (await stagesAfterExit(agent, dir, [statsWindow, logsWindow])) as [Stages, Stages];
    const koaServer = await baselineServer('koa', profiling);
    await readEachSecond(koaServer.base, bots, PROFILE_WARM_S);
    const koaWindow = await timeWindow(async () => (await readEachSecond(koaServer.base, bots, BARE_S)).length);
    const [koa] = (await stagesAfterExit(koaServer.server, dir, [koaWindow])) as [Stages];
    const promisesServer = await baselineServer('promises', profiling);
    await readEachSecond(promisesServer.base, bots, PROFILE_WARM_S);
    const promisesWindow = await timeWindow(async () => (await readEachSecond(promisesServer.base, bots, BARE_S)).length);
    platformLogs(promisesServer.port, bots[1] ?? '');
    const promisesLogsWindow = await timeWindow(async () => (platformLogs(promisesServer.port, bots[1] ?? ''), LOGS_LOOP_CALLS));
    const [promises, promisesLogs] = (await stagesAfterExit(promisesServer.server, dir, [promisesWindow, promisesLogsWindow])) as [Stages, Stages];
    return { stats, koa, logs, promises, promisesLogs };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * BURST stopped bots started at once, with an agent of its own behind a proxy of the engine's socket
 * that counts what the agent asks: how many times it listed containers, and how many stats it asked for.
 */
async function startBurst(): Promise<{ bots: number; lists: number; addressLookups: number; requests: number; peakConnections: number; streamLosses: number; failedInspections: number; inspectionError: string }> {
  const ids = Array.from({ length: BURST }, (_, i) => `bot_${i + 1}_2_burst${runId}`);
  // A network of their own: a Linux bridge takes at most 1,024 ports, and 1,000 bots are on the first.
  await docker.createNetwork({ Name: burstNetwork, Labels: { 'bot-agent-bench': runId } });
  await makeBots(docker, ids, { image: TEST_IMAGE, network: burstNetwork, benchLabel: runId, start: false });
  const proxy = new SocketProxy();
  await proxy.start();
  const { agent, port, log } = await agentProcess({ DOCKER_HOST: proxy.dockerHost, AGENT_RATE_LIMIT: '10000', AGENT_READ_RATE: '10000' });
  try {
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    // Its first listing of every bot done, so that only the burst's own events are counted.
    await indexedAll(port, bots.length);
    const before = proxy.requests.length;
    await Promise.all(ids.map((id) => docker.getContainer(id).start()));
    // The agent takes in the start events (and the network connects) meanwhile.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const asked = proxy.requests.slice(before);
    const logLines = log().split('\n');
    // Each loss of the event stream (a watchdog ping past its deadline on a busy engine) lists every container again.
    const streamLosses = logLines.filter((line) => line.includes('lost the engine event stream')).length;
    // Inspections after an event that failed twice in a row (each is tried again later, never answered with a list).
    const failed = logLines.filter((line) => line.includes('could not inspect a container after an event'));
    const failedInspections = failed.length;
    // What the engine (or the socket) said, from the first such line: the log goes with the agent's folder.
    const inspectionError = failed.length > 0 ? loggedError(failed[0]!) : '';
    const lists = asked.filter((line) => /^GET \S*\/containers\/json/.test(line));
    // The index lists every container (all=1); the driver lists running bots when a caller's address is not indexed.
    const addressLookups = lists.filter((line) => /status/.test(decodeURIComponent(line))).length;
    return { bots: BURST, lists: lists.length, addressLookups, requests: asked.length, peakConnections: proxy.peakConnections, streamLosses, failedInspections, inspectionError };
  } finally {
    agent.kill('SIGTERM');
    await proxy.close();
  }
}

type Phase = Awaited<ReturnType<typeof measure>>;

type Scale = Awaited<ReturnType<typeof atScale>>;
type Profile = Awaited<ReturnType<typeof whereCpuGoes>>;
type Verdict = [string, string, string, boolean];
/** The engine's CPU while every bot is read, against the quiet stretch: within this many points of a core counts as no higher. */
const ENGINE_NOISE = 2;

function verdicts(small: Phase, large: Phase, scale: Scale, peakRssMb: number): Verdict[] {
  const row = (what: string, target: string, got: string, ok: boolean): Verdict => [what, target, got, ok];
  const ratio = round(large.statsFromBot.p50 / small.statsFromBot.p50);
  const share = (p: Phase, of = p.statsWarm): number => round(((of.rps ?? 0) / (p.bare.rps ?? 1)) * 100, 1);
  const { steady, quiet, firstReadOfAll, burst } = scale;
  return [
    row(
      `${LARGE} bots read once a second each: agent CPU (the same reads: bare node:http ${steady.bareCpu}%, koa + @koa/router alone ${steady.koaCpu}%, ` +
        `koa keeping the agent's per-request promises ${steady.promisesCpu}%, ${round(steady.promisesCpu / steady.koaCpu)} ×)`,
      `≤ 1.5 × koa alone (${round(1.5 * steady.koaCpu, 1)}%)`, `${steady.agentCpu}% (${round(steady.agentCpu / steady.koaCpu)} ×)`, steady.agentCpu <= 1.5 * steady.koaCpu),
    row(
      `${LARGE} bots read once a second each: engine CPU`,
      `≤ quiet ${quiet.engineCpu}% + ${ENGINE_NOISE}`,
      `${steady.engineCpu}%`,
      steady.engineCpu <= quiet.engineCpu + ENGINE_NOISE,
    ),
    row(`${LARGE} bots read once a second each: p50`, '≤ 2 ms', `${steady.p50} ms`, steady.p50 <= 2),
    row(`${LARGE} bots read once a second each: agent RSS`, '≤ 150 MB', `${steady.agentRssMb} MB`, steady.agentRssMb <= 150),
    row(`${firstReadOfAll.bots} bots' first stats read, all at once`, '≤ 2000 ms', `${firstReadOfAll.ms} ms`, firstReadOfAll.ms <= 2000),
    row(
      `identity + warm stats from a bot p50, ${LARGE} bots / 5 bots (the same call to bare node:http: ${large.bareFromBot.p50} / ${small.bareFromBot.p50} ms)`,
      '≤ 1.1',
      `${ratio}`,
      ratio <= 1.1,
    ),
    row(`container lists while ${burst.bots} bots start at once`, '≤ 1', `${burst.lists}`, burst.lists <= 1),
    ...[large, small].flatMap((p) => [
      row(
        `warm stats req/s, ${p.bots} bots, vs bare node:http ${p.bare.rps} (koa + @koa/router alone: ${p.koa.rps}, ${share(p, p.koa)}%; ` +
          `koa keeping the agent's per-request promises: ${p.promises.rps}, ${share(p, p.promises)}%)`,
        '≥ 60%',
        `${p.statsWarm.rps} (${share(p)}%)`,
        share(p) >= 60,
      ),
      row(
        `logs tail=100 p50, ${p.bots} bots (koa keeping the agent's per-request promises, reading the engine through dockerode: ${p.promisesLogs.p50} ms)`,
        `≤ raw ${p.rawLogs.p50} + 0.5 ms`,
        `${p.logs.p50} ms`,
        p.logs.p50 <= p.rawLogs.p50 + 0.5,
      ),
      row(`stats warm p50, ${p.bots} bots (50 connections)`, '≤ 20 ms', `${p.statsWarm.p50} ms`, p.statsWarm.p50 <= 20),
      row(`stats cold, ${p.bots} bots`, '≤ 1200 ms', `${p.statsCold.p50} ms`, p.statsCold.p50 <= 1200),
      row(`call from a bot container p50, ${p.bots} bots`, `≤ raw ${p.rawLogs.p50} + 1 ms`, `${p.fromBot.p50} ms`, p.fromBot.p50 <= p.rawLogs.p50 + 1),
      row(`restart, ${p.bots} bots`, `≤ raw ${p.rawRestart.p50} + 20 ms`, `${p.restart.p50} ms`, p.restart.p50 <= p.rawRestart.p50 + 20),
    ]),
    ...[small, large].flatMap((p) => {
      if (!p.flooded) return [];
      const { quiet: calm, flooded } = p.flooded;
      const limit = Math.min(100, 5 * calm.p99);
      const { hostile, hostilePeakRssMb } = p.flooded;
      return [
        row(`another bot's logs p99 while one bot floods, ${p.bots} bots`, `≤ 5 × quiet ${calm.p99} ms, ≤ 100 ms`, `${flooded.p99} ms`, flooded.p99 <= limit),
        row(`another bot's logs p99 during the hostile mix, ${p.bots} bots`, '≤ 100 ms', `${hostile.p99} ms`, hostile.p99 <= 100),
        row('agent peak RSS after the hostile mix', '< 256 MiB (the chart\'s limit)', `${hostilePeakRssMb} MB`, hostilePeakRssMb < 256),
      ];
    }),
    row('agent peak RSS over the whole bench (autocannon loads included)', 'reported', `${round(peakRssMb, 1)} MB`, true),
  ];
}

/** The profile's table, and the stages where the agent's request costs more than koa's, and more than the promises baseline's, largest first. */
function whereCpuGoesReport({ stats, koa, logs, promises, promisesLogs }: Profile): string[] {
  const total = (stages: Stages): number => round(Object.values(stages.perRequest).reduce((sum, us) => sum + us, 0), 1);
  const beyond = (of: Stages): Array<readonly [string, number]> =>
    STAGE_ORDER.map((stage) => [stage, round((stats.perRequest[stage] ?? 0) - (of.perRequest[stage] ?? 0), 1)] as const)
      .filter(([, us]) => us >= 1)
      .sort((a, b) => b[1] - a[1]);
  const listed = (stages: Array<readonly [string, number]>): string => stages.map(([stage, us]) => `${stage} +${us} µs`).join('; ');
  return [
    `## Where a request's CPU goes, ${LARGE} bots`,
    '',
    `The agent, koa with @koa/router alone and koa keeping the agent's per-request promises (the third baseline), each in a process of its own ` +
      `under \`node --cpu-prof\`, answering the same reads (every bot's stats once a second for ${BARE_S} s, after ${PROFILE_WARM_S} s of warm-up: ` +
      `${stats.requests}, ${koa.requests} and ${promises.requests} requests); the agent and the promises baseline also answering the platform's ` +
      `logs calls (tail=100, one connection, ${logs.requests} in a row). ` +
      "Each sample is counted in the stage of the nearest frame of the agent's own code or of a package (Node's own code counts for whoever called it, " +
      'the HTTP client for the driver), by `scripts/bench-profile.ts`; microseconds of CPU per request, sampling included.',
    '',
    '| stage | agent, warm stats | koa alone, the same reads | koa keeping the promises, the same reads | agent, logs tail=100 | koa keeping the promises, logs tail=100 |',
    '|---|---|---|---|---|---|',
    ...STAGE_ORDER.map(
      (stage) =>
        `| ${stage} | ${stats.perRequest[stage]} | ${koa.perRequest[stage]} | ${promises.perRequest[stage]} | ${logs.perRequest[stage]} | ${promisesLogs.perRequest[stage]} |`,
    ),
    `| **all** | **${total(stats)}** | **${total(koa)}** | **${total(promises)}** | **${total(logs)}** | **${total(promisesLogs)}** |`,
    '',
    `What the agent's warm stats request costs beyond koa's, largest first: ${listed(beyond(koa))}. ` +
      `Beyond koa keeping the agent's per-request promises: ${listed(beyond(promises))}.`,
    '',
  ];
}

function report(
  machine: Record<string, string | number>,
  phases: Phase[],
  scale: Scale,
  checks: Verdict[],
  kube: KubeCallCost[],
  history: HistoryBackends,
  availability: Availability[],
  profile: Profile,
): string {
  const lines = [
    '# Benchmarks',
    '',
    `Made by \`npm run bench\` on ${machine.date}: ${machine.cores} cores, ${machine.memoryGiB} GiB, Docker Engine ${machine.engine} (API ${machine.api}).`,
    'Latencies in milliseconds. Agent calls come from loopback unless said; "raw" is the same engine call made directly through dockerode.',
    '',
    '| operation | bots | agent p50 | agent p99 | agent req/s | raw p50 | raw p99 | agent / raw |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const p of phases) {
    const rows: Array<[string, Figures, Figures]> = [
      ['stats, warm (50 connections)', p.statsWarm, p.rawStats],
      ['bare node:http, a stats-sized JSON (50 connections)', p.bare, p.rawStats],
      ['koa + @koa/router alone, the same JSON (50 connections)', p.koa, p.rawStats],
      ["koa + @koa/router keeping the agent's per-request promises, the same JSON (50 connections)", p.promises, p.rawStats],
      ['identity + stats of itself, from a bot container', p.statsFromBot, p.rawStats],
      ['the same call to bare node:http, from a bot container', p.bareFromBot, p.rawStats],
      ['stats, cold (first read)', p.statsCold, p.rawStatsOneShot],
      ['logs tail=100 (1 connection)', p.logs, p.rawLogs],
      ["koa + @koa/router keeping the agent's per-request promises, logs tail=100 through dockerode (1 connection)", p.promisesLogs, p.rawLogs],
      ['logs tail=100, from a bot container', p.fromBot, p.rawLogs],
      ['restart', p.restart, p.rawRestart],
    ];
    if (p.flooded) {
      rows.splice(
        3,
        0,
        ['logs tail=100, default limits, quiet', p.flooded.quiet, p.rawLogs],
        ['logs tail=100, default limits, while another bot floods', p.flooded.flooded, p.rawLogs],
        ['logs tail=100, default limits, during the hostile mix', p.flooded.hostile, p.rawLogs],
      );
    }
    for (const [what, agent, raw] of rows) {
      lines.push(`| ${what} | ${p.bots} | ${agent.p50} | ${agent.p99} | ${agent.rps ?? ''} | ${raw.p50} | ${raw.p99} | ${round(agent.p50 / raw.p50)} |`);
    }
  }
  for (const p of phases) {
    if (!p.flooded) continue;
    lines.push(
      '',
      `The flood (${p.bots} bots): one bot read its own 10,000-line logs in 8 parallel loops for 15 s; ` +
        `the agent answered ${p.flooded.floodOk} of those reads and refused ${p.flooded.floodRefused} (429, AGENT_READ_RATE). ` +
        `Another bot's logs, read by the platform meanwhile: p50 ${p.flooded.flooded.p50} ms, p99 ${p.flooded.flooded.p99} ms; ` +
        `quiet, on the same agent just before: p50 ${p.flooded.quiet.p50} ms, p99 ${p.flooded.quiet.p99} ms.`,
      '',
      `The hostile mix (${p.bots} bots): a bot crash-looping on 100 lines of 42,000 \\x01 bytes a run (25 MB a run once in JSON), ` +
        `40 parallel 10,000-line reads of it (${p.flooded.hostileReadsOk} answered, ${p.flooded.hostileReadsRefused} refused 429 after waiting 2 s: ` +
        `4 reads of one bot run at once) and 200 event streams nobody reads. Another bot's logs, read by the platform meanwhile: ` +
        `p50 ${p.flooded.hostile.p50} ms, p99 ${p.flooded.hostile.p99} ms. The agent's peak RSS after it: ${p.flooded.hostilePeakRssMb} MB.`,
    );
  }
  lines.push('', 'Raw stats: `stream=false` (two readings a second apart); for the cold row, `one-shot=true`.', '');
  const { steady, quiet, firstReadOfAll, burst } = scale;
  lines.push(
    `## ${LARGE} bots`,
    '',
    `- All ${firstReadOfAll.bots} bots not read before, read at once (a first read measures one second): the last answer after ${firstReadOfAll.ms} ms.`,
    `- Quiet, ${QUIET_S} s with no reads: agent ${quiet.agentCpu}% of a core, engine (dockerd, its containerd and the containers' shims) ${quiet.engineCpu}%.`,
    `- Every bot read once a second for ${STEADY_S} s, spread over each second (${steady.reads} reads): p50 ${steady.p50} ms, p99 ${steady.p99} ms; ` +
      `agent ${steady.agentCpu}% of a core, engine ${steady.engineCpu}%, agent RSS at most ${steady.agentRssMb} MB. ` +
      `Read the same way for ${BARE_S} s, the bare \`node:http\` server used ${steady.bareCpu}% of a core, koa with @koa/router alone ${steady.koaCpu}%, ` +
      `and koa with @koa/router keeping the agent's per-request promises (a request id, the caller looked up by address, the request counted and timed ` +
      `in prom-client, pino's access line; \`scripts/bench-baselines.ts\`) ${steady.promisesCpu}%: ${round(steady.promisesCpu / steady.koaCpu)} × koa alone, ` +
      `before any bot is read.`,
    `- ${burst.bots} stopped bots started at once, with an agent behind a proxy of the engine's socket: it listed containers ${burst.lists} times ` +
      `and made ${burst.requests} engine requests in all (an inspection per container an event named, at most 16 at once: ${burst.peakConnections} connections to the engine at most). ` +
      `Of those lists, ${burst.addressLookups} looked for the holder of a caller's address the index did not know. ` +
      `Its log says it lost the engine's event stream ${burst.streamLosses} times meanwhile (a watchdog ping past its 1.5 s deadline) ` +
      `and failed an inspection after an event twice in a row ${burst.failedInspections} times${burst.inspectionError ? ` (the first: "${burst.inspectionError}")` : ''}; those are tried again later, not answered with a list.`,
    '',
  );
  lines.push(...whereCpuGoesReport(profile));
  lines.push(
    '## History in SQLite and in PostgreSQL',
    '',
    `A bot's status (GET /api/bots/{id}: its exit record, crash loop and crash count from the history, beside the runtime's view), ` +
      `50 connections for 5 s, ${LARGE} bots, the same bot: with the history in SQLite (the default) ` +
      `p50 ${history.sqlite.p50} ms, p99 ${history.sqlite.p99} ms, ${history.sqlite.rps} req/s; ` +
      `with it in PostgreSQL (AGENT_DATABASE_URL, Debian's server on loopback) p50 ${history.postgres.p50} ms, p99 ${history.postgres.p99} ms, ${history.postgres.rps} req/s.`,
    '',
  );
  lines.push(
    '## Kubernetes',
    '',
    'The agent on the real single-node cluster (`npm run kube:up`), in the bench process: the API server requests it made per call, ' +
      'once warm (watches left out), counted on undici\'s diagnostics channel, over 200 calls each from loopback.',
    '',
    '| call | API server requests per call | p50 ms |',
    '|---|---|---|',
    ...kube.map((c) => `| ${c.call} | ${c.requestsPerCall} | ${c.p50Ms} |`),
    '',
    "Identities, look-ups and rollout waits read the agent's watches of the bots' Deployments and pods. " +
      "A pod's metrics are asked of metrics.k8s.io at most once per 10 s (metrics-server samples every 15 s), a node's capacity once a minute; " +
      'logs are read from the API server each time.',
    '',
  );
  lines.push(
    '## Two agents on Kubernetes, agents replaced under load',
    '',
    "The chart with two replicas and one history in PostgreSQL, on the same cluster; a bot's status asked through the Service every 100 ms, " +
      'one call at a time (5 s time-out), while the agents are replaced.',
    '',
    '| while | calls | failed | longest gap between answers (ms) | slowest answer (ms) |',
    '|---|---|---|---|---|',
    ...availability.map((a) => `| ${a.event} | ${a.calls} | ${a.failed} | ${a.longestGapMs} | ${a.slowestMs} |`),
    '',
  );
  lines.push('## Targets', '', '| target | wanted | measured | met |', '|---|---|---|---|');
  for (const [what, target, got, ok] of checks) lines.push(`| ${what} | ${target} | ${got} | ${ok ? 'yes' : '**no**'} |`);
  return `${lines.join('\n')}\n`;
}

async function main(): Promise<void> {
  execFileSync('bash', ['scripts/docker-engine.sh', '--test-image'], { stdio: ['ignore', 'ignore', 'inherit'] });
  execFileSync('npm', ['run', '--silent', 'build'], { stdio: 'inherit' });
  await docker.createNetwork({ Name: network, Labels: { 'bot-agent-bench': runId } });
  const gateway = ((await docker.getNetwork(network).inspect()) as { IPAM: { Config: Array<{ Gateway: string }> } }).IPAM.Config[0]?.Gateway ?? '';
  // The bench measures speed: the rate limits would refuse its repeated restarts and reads.
  const { agent, port } = await agentProcess({ AGENT_RATE_LIMIT: '10000', AGENT_READ_RATE: '10000' });
  bare = await baselineServer('node');
  bareKoa = await baselineServer('koa');
  promised = await baselineServer('promises');
  const base = `http://127.0.0.1:${port}`;
  const interrupted = (): void => {
    process.stderr.write('bench: interrupted; its containers are being removed in the background\n');
    agent.kill('SIGTERM');
    bare.server.kill();
    bareKoa.server.kill();
    promised.server.kill();
    void removeEverything(runId, `${network} ${burstNetwork}`, false).then(() => process.exit(130));
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  try {
    const phases: Phase[] = [];
    let scale: Scale | undefined;
    let profile: Profile | undefined;
    for (const count of [5, LARGE]) {
      process.stderr.write(`bench: ${count} bots\n`);
      await addBots(count);
      phases.push(await measure(count, base, port, gateway));
      if (count === LARGE) {
        scale = await atScale();
        process.stderr.write('bench: where the CPU goes (node --cpu-prof)\n');
        profile = await whereCpuGoes();
      }
    }
    const rssMb = peakRss(agent);
    const version = await docker.version();
    const machine = {
      date: new Date().toISOString().slice(0, 10),
      cores: cpus().length,
      memoryGiB: round(totalmem() / 2 ** 30, 1),
      engine: version.Version,
      api: version.ApiVersion,
    };
    const [small, large] = phases as [Phase, Phase];
    process.stderr.write('bench: history in SQLite and in PostgreSQL\n');
    const history = await historyBackends(base, bots[0] ?? '');
    // Last: the cluster's daemons would otherwise weigh on every Docker figure; and the Docker figures'
    // thousand containers (and their agent) are gone first, not weighing on the cluster's.
    agent.kill('SIGTERM');
    process.stderr.write(`bench: removing ${bots.length + BURST} containers\n`);
    await removeEverything(runId, `${network} ${burstNetwork}`, true);
    process.stderr.write('bench: kubernetes\n');
    const { costs: kube, availability } = await kubernetesCosts();
    const checks = [
      ...verdicts(small, large, scale!, rssMb),
      ...kube
        .filter((c) => !c.call.startsWith('POST'))
        .map((c): Verdict => [`Kubernetes: API requests per warm ${c.call}`, '0', `${c.requestsPerCall}`, c.requestsPerCall === 0]),
      ...availability.flatMap((a): Verdict[] => [
        [`Two agents, ${a.event}: failed calls`, '0', `${a.failed} of ${a.calls}`, a.failed === 0],
        [`Two agents, ${a.event}: longest gap`, '< 1000 ms', `${a.longestGapMs} ms`, a.longestGapMs < 1000],
      ]),
    ];
    const markdown = report(machine, phases, scale!, checks, kube, history, availability, profile!);
    // The sections npm run bench:outage and bench:console wrote stay.
    const kept = ownSections();
    writeFileSync('BENCHMARKS.md', kept.length > 0 ? `${markdown.trimEnd()}\n\n${kept.join('\n\n')}\n` : markdown);
    writeFileSync('BENCHMARKS.json', `${JSON.stringify({ machine, bots: LARGE, phases, scale, profile, history, kubernetes: kube, availability, peakRssMb: round(rssMb, 1), targets: checks }, null, 2)}\n`);
    process.stdout.write(markdown);
  } catch (err) {
    process.stderr.write(`bench: failed: ${(err as Error).stack ?? String(err)}\n`);
    throw err;
  } finally {
    agent.kill('SIGTERM');
    bare.server.kill();
    bareKoa.server.kill();
    promised.server.kill();
    await removeEverything(runId, `${network} ${burstNetwork}`, true);
  }
}

await main();
