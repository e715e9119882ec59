// A/B of a warm request's CPU: builds of the agent (and the three baselines) loaded in turns, the
// server pinned to one core and the load to the other, so that neither steals the other's CPU.
// Prints, per server, the median and the lowest and highest over the rounds of: CPU µs a warm stats
// request at a steady 1,000 req/s, CPU µs a request and req/s at 50 connections, and the p50 of a logs
// tail=100 call (one kept-alive connection) by node:http and by curl, each beside the engine's own call
// made the same way; and, given two builds or more, whether each differs from the first (BENCHMARKS.md
// says how to read it). Needs `npm test`'s set-up (the engine, its test image) and built checkouts
// (`npm run build`).
// Usage: npm run bench:ab -- [--rounds N] NAME=DIR[,NODE_FLAG...] ...   (DIR: a checkout with dist/)
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, openSync, closeSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import Docker from 'dockerode';
import { BASELINES } from './bench-baselines.js';
import { writeSection } from './bench-sections.js';
import { cpuSeconds, median, percentiles, post, timed } from './bench-scale.js';
import type { BaselineKind } from './bench-baselines.js';

// The load runs on core 0 (npm run bench:ab starts this process there).
const SERVER_CORE = '1';
/** As scripts/start.sh and the image run the agent. */
const AGENT_FLAGS = ['--max-semi-space-size=2', '--heap-growing-percent=30', '--no-allocation-site-pretenuring', '--expose-gc'];
const BOT = 'bot_9_9_ab';

// The raw logs call keeps its connection to the engine between calls, as the agent does (Node's agent: kept 5 s idle).
const docker = new Docker();
const args = process.argv.slice(2);
const roundsAt = args.indexOf('--rounds');
const rounds = roundsAt >= 0 ? Number(args.splice(roundsAt, 2)[1]) : 5;
/** The baselines (node=, koa=, promises=) first, then each NAME=DIR, or NAME=DIR,FLAG,... for that build with other Node flags (`NAME=DIR,` for none). */
const targets = [...Object.keys(BASELINES).map((name) => `${name}=`), ...args].map((arg) => {
  const at = arg.indexOf('=');
  const [dir = '', ...flags] = arg.slice(at + 1).split(',');
  return { name: arg.slice(0, at), dir, flags: arg.includes(',') ? flags.filter(Boolean) : AGENT_FLAGS };
});


let port = 18_700;
async function serve(name: string, dir: string, flags: string[]): Promise<{ server: ChildProcess; base: string; cleanup(): void }> {
  port++;
  const dataDir = mkdtempSync(join(tmpdir(), 'bot-agent-ab-'));
  const logFd = openSync(join(dataDir, 'agent.log'), 'a');
  const env = { ...process.env, AGENT_HOST: '127.0.0.1', AGENT_PORT: String(port), AGENT_DATA_DIR: dataDir, AGENT_READ_RATE: '10000', AGENT_RATE_LIMIT: '10000' };
  const baseline = Object.hasOwn(BASELINES, name) ? BASELINES[name as BaselineKind] : undefined;
  if (!dir && !baseline) throw new Error(`${name}: no checkout given, and no baseline of that name`);
  const command = dir || !baseline ? [...flags, join(dir, 'dist/main.js')] : ['--input-type=module', '-e', baseline(port, '127.0.0.1')];
  const server = spawn('taskset', ['-c', SERVER_CORE, process.execPath, ...command], { env, stdio: ['ignore', logFd, 'inherit'], cwd: dir || process.cwd() });
  closeSync(logFd);
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200 && !(await fetch(`${base}/api/bots/${BOT}/stats`).then((r) => r.ok, () => false)); i++) await new Promise((r) => setTimeout(r, 50));
  return { server, base, cleanup: () => rmSync(dataDir, { recursive: true, force: true }) };
}

async function cpuPerRequest(pid: number, options: autocannon.Options): Promise<{ us: number; rps: number }> {
  const before = cpuSeconds(pid);
  const result = await autocannon(options);
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${options.url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return { us: ((cpuSeconds(pid) - before) * 1e6) / result.requests.total, rps: result.requests.average };
}

/** p50 of `count` calls in a row over one keep-alive connection, in ms. */
const p50 = async (count: number, call: () => Promise<unknown>): Promise<number> => percentiles(await timed(count, call)).p50;

const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 1 });
const logsCall = (base: string): Promise<void> => post(base, '/api/bots/logs', JSON.stringify({ bot_id: BOT, lines: 100 }), keepAlive);
const engineSocket = new http.Agent({ keepAlive: true, maxSockets: 1 });
/** The engine's own logs call with no client library: node:http on its socket, kept alive, the answer read whole. */
const rawLogsCall = (): Promise<void> =>
  new Promise((resolve, reject) => {
    http
      .get({ socketPath: '/var/run/docker.sock', path: `/containers/${BOT}/logs?stdout=1&stderr=1&tail=100`, agent: engineSocket }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`engine logs: HTTP ${res.statusCode}`))));
      })
      .on('error', reject);
  });
/** p50 of `count` reads of `url` by curl, one process keeping its connection between them (as an outside client measures), in ms. */
function curlP50(count: number, url: string, curlArgs: string[] = []): number {
  const perRead = ['-o', '/dev/null', ...curlArgs, url];
  const out = execFileSync('curl', ['-sf', '-w', '%{time_total}\n', ...Array.from({ length: count }, () => perRead).flat()], { encoding: 'utf8' });
  // The first reads open the connection and warm the server's path: left out.
  return percentiles(out.trim().split('\n').slice(10).map((seconds) => Number(seconds) * 1000)).p50;
}
const curlAgentLogs = (base: string): number => curlP50(300, `${base}/api/bots/${BOT}/logs?lines=100`);
const curlEngineLogs = (): number => curlP50(300, `http://engine/containers/${BOT}/logs?stdout=1&stderr=1&tail=100`, ['--unix-socket', '/var/run/docker.sock']);

/** A figure as the table shows it: the median of the rounds, and their lowest and highest. */
const shown = (values: number[], digits: number): string =>
  values.every(Number.isNaN) ? '' : `${median(values).toFixed(digits)} (${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)})`;

/** Each figure of one server, a value per round. */
interface Rounds {
  steady: number[];
  loaded: number[];
  rps: number[];
  logs: number[];
  curlLogs: number[];
}
const FIGURES: Array<[key: keyof Rounds, name: string, lowerIsBetter: boolean]> = [
  ['steady', 'µs a request at 1,000 req/s', true],
  ['loaded', 'µs a request at 50 connections', true],
  ['rps', 'req/s at 50 connections', false],
  ['logs', 'logs tail=100 p50 (node:http)', true],
  ['curlLogs', 'logs tail=100 p50 (curl)', true],
];

/**
 * Whether `after` differs from `before` in this run: only when every round of one lies beyond every round of the
 * other (with 5 rounds each, two builds alike would do that by chance less than once in a hundred runs).
 */
function verdict(before: number[], after: number[], lowerIsBetter: boolean): string {
  const [a, b] = [before.filter((v) => !Number.isNaN(v)), after.filter((v) => !Number.isNaN(v))];
  if (a.length === 0 || b.length === 0) return '';
  const change = `${(((median(b) - median(a)) / median(a)) * 100).toFixed(1)}%`;
  if (Math.max(...b) < Math.min(...a)) return `${lowerIsBetter ? 'better' : 'worse'} (${change})`;
  if (Math.min(...b) > Math.max(...a)) return `${lowerIsBetter ? 'worse' : 'better'} (${change})`;
  return `no difference this run can tell (${change})`;
}

async function main(): Promise<void> {
  await docker.getContainer(BOT).remove({ force: true }).catch(() => undefined);
  const bot = await docker.createContainer({
    name: BOT,
    Image: 'bot-agent-testbot:latest',
    Cmd: ['sh', '-c', 'for i in $(seq 1 200); do echo "line $i of the bot, as long as a line of a real bot might be"; done; exec sleep 2147483647'],
    Labels: { 'bot-agent/bot-id': BOT, 'bot-agent/user-id': 'user_1' },
  });
  await bot.start();
  const figures = new Map<string, Rounds>();
  const raw = { dockerode: [] as number[], node: [] as number[], curl: [] as number[] };
  try {
    for (let round = 0; round < rounds; round++) {
      raw.dockerode.push(await p50(300, () => bot.logs({ stdout: true, stderr: true, tail: 100, follow: false })));
      raw.node.push(await p50(300, rawLogsCall));
      raw.curl.push(curlEngineLogs());
      // Every other round in the opposite order: a machine that drifts over the run weighs on all servers alike.
      const order = round % 2 === 0 ? targets : [...targets].reverse();
      for (const { name, dir, flags } of order) {
        const { server, base, cleanup } = await serve(name, dir, flags);
        try {
          const pid = server.pid ?? 0;
          const url = `${base}/api/bots/${BOT}/stats`;
          await autocannon({ url, connections: 50, duration: 3 });
          const steady = await cpuPerRequest(pid, { url, connections: 10, overallRate: 1000, duration: 8 });
          const loaded = await cpuPerRequest(pid, { url, connections: 50, duration: 6 });
          // NaN in the table: that build did not answer its logs calls (an ablation without the body parser, say).
          const agentLike = dir !== '';
          const logs = agentLike || name === 'promises' ? await p50(300, () => logsCall(base)).catch(() => NaN) : NaN;
          const curlLogs = agentLike ? (() => { try { return curlAgentLogs(base); } catch { return NaN; } })() : NaN;
          const seen = figures.get(name) ?? { steady: [], loaded: [], rps: [], logs: [], curlLogs: [] };
          seen.steady.push(steady.us);
          seen.loaded.push(loaded.us);
          seen.rps.push(loaded.rps);
          seen.logs.push(logs);
          seen.curlLogs.push(curlLogs);
          figures.set(name, seen);
          console.error(`round ${round + 1} ${name}: ${steady.us.toFixed(0)} µs at 1,000 req/s; ${loaded.us.toFixed(0)} µs, ${loaded.rps.toFixed(0)} req/s at 50; logs p50 ${logs.toFixed(2)} ms, by curl ${curlLogs.toFixed(2)} ms`);
        } finally {
          server.kill('SIGTERM');
          await once(server, 'exit');
          cleanup();
        }
      }
    }
  } finally {
    await bot.remove({ force: true });
  }
  const bare = median(figures.get('node')?.rps ?? []);
  const floor = figures.get('promises');
  const [floorRps, floorSteady, floorLoaded] = [median(floor?.rps ?? []), median(floor?.steady ?? []), median(floor?.loaded ?? [])];
  const [rawNode, rawCurl] = [median(raw.node), median(raw.curl)];
  // The goals of docs/performance.md ("The cost per request"): 90% of the floor's req/s, 1.15 × its CPU, logs within 0.5 ms of the raw call.
  const table = [
    '| server | µs a request, 1,000 req/s | × the floor | µs a request, 50 connections | × the floor | req/s, 50 connections | % of bare node:http | % of the floor | logs tail=100 p50 ms, node:http | − the engine\'s ms | logs tail=100 p50 ms, curl | − the engine\'s ms |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const [name, seen] of figures) {
    const [rps, steady, loaded, logs, curlLogs] = [median(seen.rps), median(seen.steady), median(seen.loaded), median(seen.logs), median(seen.curlLogs)];
    const minus = (value: number, engine: number): string => (Number.isNaN(value) ? '' : (value - engine).toFixed(2));
    table.push(
      `| ${name} | ${shown(seen.steady, 0)} | ${(steady / floorSteady).toFixed(2)} | ${shown(seen.loaded, 0)} | ${(loaded / floorLoaded).toFixed(2)} | ${shown(seen.rps, 0)} | ${((100 * rps) / bare).toFixed(1)} | ${((100 * rps) / floorRps).toFixed(1)} | ${shown(seen.logs, 2)} | ${minus(logs, rawNode)} | ${shown(seen.curlLogs, 2)} | ${minus(curlLogs, rawCurl)} |`,
    );
  }
  const builds = targets.filter(({ dir }) => dir);
  const verdicts: string[] = [];
  const first = builds[0];
  for (const build of builds.slice(1)) {
    const [before, after] = [figures.get(first?.name ?? ''), figures.get(build.name)];
    if (!before || !after) continue;
    verdicts.push(`- ${build.name} against ${first?.name}: ${FIGURES.map(([key, figure, lower]) => `${figure}: ${verdict(before[key], after[key], lower)}`).join('; ')}.`);
  }
  console.log([...table, '', ...verdicts].join('\n'));
  writeSection(
    'ab',
    [
      '## One build against another, and the floors (`npm run bench:ab`)',
      '',
      `Made on ${new Date().toISOString().slice(0, 10)}: ${rounds} rounds, each server in every round (every other round in the opposite order), the server pinned to one core and the load to the other; ` +
        `each cell the median of the rounds, then their lowest and highest: ${builds.map(({ name, dir }) => `${name} = ${revisionOf(dir)}`).join('; ')}. ` +
        "node is bare `node:http`, koa is koa with @koa/router alone, promises is koa keeping the agent's per-request promises (the floor; scripts/bench-baselines.ts). " +
        `The engine's own logs call, kept alive: ${shown(raw.node, 2)} ms by node:http on its socket, ${shown(raw.curl, 2)} ms by curl, ${shown(raw.dockerode, 2)} ms through dockerode; ` +
        'each logs column is set against the engine read the same way.',
      '',
      ...table,
      ...(verdicts.length > 0 ? ['', ...verdicts] : []),
      '',
      'How to read it: a cell is the median of the rounds, then the lowest and the highest round. Two builds differ in a run only where ' +
        'every round of one lies beyond every round of the other (the lines under the table say so per figure); any other gap between ' +
        "medians is this machine's noise, however large it looks. The floors are measured in the same minutes as the builds, so compare " +
        'the × the floor columns from one run to another, never the µs: the machine itself moves between runs. A logs column is set ' +
        'against the engine read by the same client, so that what the client costs falls out of the difference.',
    ].join('\n'),
  );
}

/** The commit a checkout is at, and whether its files differ from it. */
function revisionOf(dir: string): string {
  try {
    const commit = execFileSync('git', ['-C', dir, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    const changed = execFileSync('git', ['-C', dir, 'status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).trim() !== '';
    return changed ? `${commit} with changes` : commit;
  } catch {
    return dir;
  }
}

await main();
