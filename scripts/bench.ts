// npm run bench: the agent against the real Docker engine with 5 and then 100
// labelled busybox bots, next to the raw engine call for each operation.
// Writes BENCHMARKS.md and BENCHMARKS.json; removes every container it made.
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { cpus, totalmem } from 'node:os';
import autocannon from 'autocannon';
import Docker from 'dockerode';

const TEST_IMAGE = 'bot-agent-testbot:latest';
const IDLE = "seq 1 200; trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done";
const runId = randomBytes(3).toString('hex');
const docker = new Docker({ socketPath: '/var/run/docker.sock' });
const network = `bot-agent-bench-${runId}`;
const bots: string[] = [];

type Figures = { p50: number; p99: number; rps?: number };
const ms = (ns: bigint): number => Number(ns) / 1e6;
const round = (value: number, digits = 2): number => Number(value.toFixed(digits));

function percentiles(samples: number[]): Figures {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] ?? NaN;
  return { p50: round(at(0.5)), p99: round(at(0.99)) };
}

async function timed(times: number, call: () => Promise<unknown>): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < times; i++) {
    const start = process.hrtime.bigint();
    await call();
    samples.push(ms(process.hrtime.bigint() - start));
  }
  return samples;
}

async function freePort(): Promise<number> {
  const probe = createServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => probe.once('listening', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

async function addBots(count: number): Promise<void> {
  while (bots.length < count) {
    const id = `bot_${bots.length + 1}_1_bench${runId}`;
    const container = await docker.createContainer({
      name: id,
      Image: TEST_IMAGE,
      Cmd: ['sh', '-c', IDLE],
      Labels: { 'bot-agent/bot-id': id, 'bot-agent/user-id': 'user_1', 'bot-agent-bench': runId },
      HostConfig: { NetworkMode: network },
    });
    await container.start();
    bots.push(id);
  }
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
    const one = () => new Promise((resolve, reject) => { const t = process.hrtime.bigint();
      http.request({ host: process.env.AGENT, port: process.env.PORT, path: '/api/bots/logs', method: 'POST', agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (r) => { r.resume();
        r.on('end', () => r.statusCode === 200 ? (times.push(Number(process.hrtime.bigint() - t) / 1e6), resolve()) : reject(new Error('HTTP ' + r.statusCode))); })
      .on('error', reject).end(body); });
    (async () => { for (let i = 0; i < 50; i++) await one(); times.length = 0; for (let i = 0; i < 500; i++) await one();
      times.sort((a, b) => a - b); console.log(JSON.stringify({ p50: times[250], p99: times[495] })); })()
      .catch((e) => console.log(JSON.stringify({ error: e.message })));`;

/** The figures LOGS_LOOP printed. */
function loopFigures(out: string): Figures {
  const result = JSON.parse(out.slice(out.indexOf('{'), out.lastIndexOf('}') + 1)) as Figures & { error?: string };
  if (result.error) throw new Error(`the logs loop failed: ${result.error}`);
  return { p50: round(result.p50), p99: round(result.p99) };
}

/** p50/p99 of logs calls made from inside a bot container (node, from the stand-in base image). */
async function fromBotContainer(agentPort: number, gateway: string, phase: number): Promise<Figures> {
  const id = `bot_9_${phase}_loader${runId}`;

  const container = await docker.createContainer({
    name: id,
    Image: execFileSync('bash', ['scripts/node-base-image.sh'], { encoding: 'utf8' }).trim(),
    Cmd: ['node', '-e', LOGS_LOOP],
    Env: [`BOT_ID=${id}`, `AGENT=${gateway}`, `PORT=${agentPort}`, 'PRINT_LINES=1'],
    Labels: { 'bot-agent/bot-id': id, 'bot-agent/user-id': 'user_1', 'bot-agent-bench': runId },
    HostConfig: { NetworkMode: network },
  });
  await container.start();
  await container.wait();
  return loopFigures((await container.logs({ stdout: true, stderr: true, follow: false })).toString('utf8'));
}

/** A POST that resolves once the whole answer is in; rejects unless it is a 200. */
function post(base: string, path: string, body: string, agent: http.Agent): Promise<void> {
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
  const rawStats = percentiles(await timed(3, () => docker.getContainer(first).stats({ stream: false })));
  const rawStatsOneShot = percentiles(await timed(3, () => docker.getContainer(first).stats({ stream: false, 'one-shot': true })));
  // Timed by LOGS_LOOP in a process of its own, as from a bot container below:
  // autocannon rounds latencies to whole milliseconds.
  const logs = loopFigures(
    execFileSync(process.execPath, ['-e', LOGS_LOOP], {
      env: { ...process.env, BOT_ID: second, AGENT: '127.0.0.1', PORT: String(agentPort) },
      encoding: 'utf8',
    }),
  );
  const rawLogs = percentiles(
    await timed(1000, () => docker.getContainer(second).logs({ stdout: true, stderr: true, tail: 100, follow: false })),
  );
  const fromBot = await fromBotContainer(agentPort, gateway, count);
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
  return { bots: count, statsWarm, statsCold: percentiles(cold), rawStats, rawStatsOneShot, logs, rawLogs, fromBot, restart, rawRestart };
}

type Phase = Awaited<ReturnType<typeof measure>>;

function verdicts(small: Phase, large: Phase, rssMb: number): Array<[string, string, string, boolean]> {
  const row = (what: string, target: string, got: string, ok: boolean): [string, string, string, boolean] => [what, target, got, ok];
  const ratio = round(large.fromBot.p50 / small.fromBot.p50);
  return [large, small].flatMap((p) => [
    row(`stats warm p50, ${p.bots} bots`, '≤ 20 ms', `${p.statsWarm.p50} ms`, p.statsWarm.p50 <= 20),
    row(`stats warm req/s, ${p.bots} bots`, '≥ 2000', `${p.statsWarm.rps}`, (p.statsWarm.rps ?? 0) >= 2000),
    row(`stats cold, ${p.bots} bots`, '≤ 1200 ms', `${p.statsCold.p50} ms`, p.statsCold.p50 <= 1200),
    row(`logs tail=100 p50, ${p.bots} bots`, `≤ raw ${p.rawLogs.p50} + 1 ms`, `${p.logs.p50} ms`, p.logs.p50 <= p.rawLogs.p50 + 1),
    row(`call from a bot container p50, ${p.bots} bots`, `≤ raw ${p.rawLogs.p50} + 1 ms`, `${p.fromBot.p50} ms`, p.fromBot.p50 <= p.rawLogs.p50 + 1),
    row(`restart, ${p.bots} bots`, `≤ raw ${p.rawRestart.p50} + 20 ms`, `${p.restart.p50} ms`, p.restart.p50 <= p.rawRestart.p50 + 20),
  ]).concat([
    row('identity p50, 100 bots / 5 bots', '≤ 1.2', `${ratio}`, ratio <= 1.2),
    row('agent peak RSS, 100 bots under load', '≤ 150 MB', `${round(rssMb, 1)} MB`, rssMb <= 150),
  ]);
}

function report(machine: Record<string, string | number>, phases: Phase[], checks: ReturnType<typeof verdicts>): string {
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
      ['stats, cold (first read)', p.statsCold, p.rawStatsOneShot],
      ['logs tail=100 (1 connection)', p.logs, p.rawLogs],
      ['logs tail=100, from a bot container', p.fromBot, p.rawLogs],
      ['restart', p.restart, p.rawRestart],
    ];
    for (const [what, agent, raw] of rows) {
      lines.push(`| ${what} | ${p.bots} | ${agent.p50} | ${agent.p99} | ${agent.rps ?? ''} | ${raw.p50} | ${raw.p99} | ${round(agent.p50 / raw.p50)} |`);
    }
  }
  lines.push('', 'Raw stats: `stream=false` (two readings a second apart); for the cold row, `one-shot=true`.', '');
  lines.push('## Targets', '', '| target | wanted | measured | met |', '|---|---|---|---|');
  for (const [what, target, got, ok] of checks) lines.push(`| ${what} | ${target} | ${got} | ${ok ? 'yes' : '**no**'} |`);
  return `${lines.join('\n')}\n`;
}

async function main(): Promise<void> {
  execFileSync('bash', ['scripts/docker-engine.sh', '--test-image'], { stdio: ['ignore', 'ignore', 'inherit'] });
  execFileSync('npm', ['run', '--silent', 'build'], { stdio: 'inherit' });
  await docker.createNetwork({ Name: network, Labels: { 'bot-agent-bench': runId } });
  const gateway = ((await docker.getNetwork(network).inspect()) as { IPAM: { Config: Array<{ Gateway: string }> } }).IPAM.Config[0]?.Gateway ?? '';
  const port = await freePort();
  const agent = spawn(process.execPath, ['dist/main.js'], {
    // The bench measures speed: the rate limit would refuse its repeated restarts.
    env: { ...process.env, AGENT_HOST: '0.0.0.0', AGENT_PORT: String(port), AGENT_RATE_LIMIT: '10000' },
    stdio: 'ignore',
  });
  const base = `http://127.0.0.1:${port}`;
  try {
    for (let i = 0; i < 100 && !(await fetch(`${base}/readyz`).then((r) => r.ok, () => false)); i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const phases: Phase[] = [];
    for (const count of [5, 100]) {
      await addBots(count);
      process.stderr.write(`bench: ${count} bots\n`);
      phases.push(await measure(count, base, port, gateway));
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
    const checks = verdicts(small, large, rssMb);
    const markdown = report(machine, phases, checks);
    writeFileSync('BENCHMARKS.md', markdown);
    writeFileSync('BENCHMARKS.json', `${JSON.stringify({ machine, phases, peakRssMb: round(rssMb, 1), targets: checks }, null, 2)}\n`);
    process.stdout.write(markdown);
  } finally {
    agent.kill('SIGTERM');
    const mine = await docker.listContainers({ all: true, filters: { label: [`bot-agent-bench=${runId}`] } });
    await Promise.all(mine.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
    await docker.getNetwork(network).remove().catch(() => undefined);
  }
}

await main();
