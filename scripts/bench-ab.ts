// A/B of a warm request's CPU: builds of the agent (and the three baselines) loaded in turns, the
// server pinned to one core and the load to the other, so that neither steals the other's CPU.
// Prints, per server, the medians over the rounds of: CPU µs a warm stats request at a steady
// 1,000 req/s, CPU µs a request and req/s at 50 connections, and the p50 of a logs tail=100 call
// (one connection) beside the engine's own. Needs `npm test`'s set-up (the engine, its test image)
// and built checkouts (`npm run build`).
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
import { cpuSeconds, percentiles, post, timed } from './bench-scale.js';
import type { BaselineKind } from './bench-baselines.js';

// The load runs on core 0 (npm run bench:ab starts this process there).
const SERVER_CORE = '1';
/** As scripts/start.sh and the image run the agent. */
const AGENT_FLAGS = ['--max-semi-space-size=2', '--heap-growing-percent=30', '--no-allocation-site-pretenuring'];
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

const median = (values: number[]): number => values.sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

async function main(): Promise<void> {
  await docker.getContainer(BOT).remove({ force: true }).catch(() => undefined);
  const bot = await docker.createContainer({
    name: BOT,
    Image: 'bot-agent-testbot:latest',
    Cmd: ['sh', '-c', 'for i in $(seq 1 200); do echo "line $i of the bot, as long as a line of a real bot might be"; done; exec sleep 2147483647'],
    Labels: { 'bot-agent/bot-id': BOT, 'bot-agent/user-id': 'user_1' },
  });
  await bot.start();
  const figures = new Map<string, { steady: number[]; loaded: number[]; rps: number[]; logs: number[] }>();
  const raw: number[] = [];
  try {
    for (let round = 0; round < rounds; round++) {
      raw.push(await p50(300, () => bot.logs({ stdout: true, stderr: true, tail: 100, follow: false })));
      for (const { name, dir, flags } of targets) {
        const { server, base, cleanup } = await serve(name, dir, flags);
        try {
          const pid = server.pid ?? 0;
          const url = `${base}/api/bots/${BOT}/stats`;
          await autocannon({ url, connections: 50, duration: 3 });
          const steady = await cpuPerRequest(pid, { url, connections: 10, overallRate: 1000, duration: 8 });
          const loaded = await cpuPerRequest(pid, { url, connections: 50, duration: 6 });
          // NaN in the table: that build did not answer its logs calls (an ablation without the body parser, say).
          const logs = dir || name === 'promises' ? await p50(300, () => logsCall(base)).catch(() => NaN) : 0;
          const seen = figures.get(name) ?? { steady: [], loaded: [], rps: [], logs: [] };
          seen.steady.push(steady.us);
          seen.loaded.push(loaded.us);
          seen.rps.push(loaded.rps);
          seen.logs.push(logs);
          figures.set(name, seen);
          console.error(`round ${round + 1} ${name}: ${steady.us.toFixed(0)} µs at 1,000 req/s; ${loaded.us.toFixed(0)} µs, ${loaded.rps.toFixed(0)} req/s at 50; logs p50 ${logs.toFixed(2)} ms`);
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
  const floorRps = median(floor?.rps ?? []);
  const floorSteady = median(floor?.steady ?? []);
  const floorLoaded = median(floor?.loaded ?? []);
  const rawLogs = median(raw);
  // The goals of docs/performance.md ("The cost per request"): 90% of the floor's req/s, 1.15 × its CPU, logs within 0.5 ms of the raw call.
  const table = [
    `| server | µs a request, 1,000 req/s | × the floor | µs a request, 50 connections | × the floor | req/s, 50 connections | % of bare node:http | % of the floor | logs tail=100 p50 ms (raw ${rawLogs.toFixed(2)}, keep-alive) | − raw ms |`,
    '|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const [name, seen] of figures) {
    const rps = median(seen.rps);
    const steady = median(seen.steady);
    const loaded = median(seen.loaded);
    const logs = name === 'node' || name === 'koa' ? undefined : median(seen.logs);
    table.push(
      `| ${name} | ${steady.toFixed(0)} | ${(steady / floorSteady).toFixed(2)} | ${loaded.toFixed(0)} | ${(loaded / floorLoaded).toFixed(2)} | ${rps.toFixed(0)} | ${((100 * rps) / bare).toFixed(1)} | ${((100 * rps) / floorRps).toFixed(1)} | ${logs?.toFixed(2) ?? ''} | ${logs === undefined ? '' : (logs - rawLogs).toFixed(2)} |`,
    );
  }
  console.log(table.join('\n'));
  const builds = targets.filter(({ dir }) => dir).map(({ name, dir }) => `${name} = ${revisionOf(dir)}`);
  writeSection(
    'ab',
    [
      '## One build against another, and the floors (`npm run bench:ab`)',
      '',
      `Made on ${new Date().toISOString().slice(0, 10)}, the medians of ${rounds} rounds, the server pinned to one core and the load to the other: ${builds.join('; ')}. ` +
        "node is bare `node:http`, koa is koa with @koa/router alone, promises is koa keeping the agent's per-request promises (the floor; scripts/bench-baselines.ts). " +
        'The raw logs call is dockerode\'s, over a kept-alive connection, as the agent\'s are.',
      '',
      ...table,
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
