// npm run bench:health: what heartbeats and the watchdog cost (docs/api.md §13), with BENCH_BOTS (1,000) idle
// bots on the real engine and the agent in a process of its own (src/main.ts, AGENT_IDENTITY=token, so that
// one client on the host can speak for every bot with its token). First a quiet stretch (the watchdog looks
// at every running bot each second), then every bot beats once each 5 s, spread evenly, over kept-alive
// connections: the agent's CPU and memory, and each beat's time. Writes its section of BENCHMARKS.md.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { TEST_IMAGE } from '../test/helpers/docker-fixture.js';
import { writeSection } from './bench-sections.js';
import { cpuPercentDuring, makeBots, percentiles, removeEverything, round, rssMb } from './bench-scale.js';

const BOTS = Number(process.env.BENCH_BOTS ?? 1000);
const EVERY_S = 5;
const QUIET_S = 20;
const BEATING_S = 60;
const runId = randomBytes(3).toString('hex');
const network = `bot-agent-bench-health-${runId}`;
const docker = new Docker({ socketPath: '/var/run/docker.sock' });
const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 32 });

function request(port: number, method: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers: { 'content-length': '0', ...headers }, agent: keepAlive }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject).end();
  });
}

async function startAgentProcess(dataDir: string) {
  const child = spawn(process.execPath, ['--import=tsx', 'src/main.ts'], {
    env: { ...process.env, AGENT_HOST: '127.0.0.1', AGENT_PORT: '0', AGENT_IDENTITY: 'token', AGENT_DATA_DIR: dataDir },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
      const listening = /"port":(\d+)[^\n]*bot-agent listening/.exec(output);
      if (listening) resolve(Number(listening[1]));
    });
    child.once('exit', (code) => reject(new Error(`the agent exited (${code}) before it listened: ${output}`)));
  });
  child.stdout.resume();
  return { child, port };
}

/** A bot's gauge from /metrics. */
async function gauge(port: number, pattern: RegExp): Promise<number> {
  return Number(pattern.exec((await request(port, 'GET', '/metrics')).body)?.[1] ?? NaN);
}

async function main(): Promise<void> {
  const ids = Array.from({ length: BOTS }, (_, i) => `bot_9${i}_1_health${runId}`);
  await docker.createNetwork({ Name: network, Labels: { 'bot-agent-bench': runId } });
  process.on('SIGINT', () => void removeEverything(runId, network, false).then(() => process.exit(130)));
  const dataDir = mkdtempSync(join(tmpdir(), 'bot-agent-bench-health-'));
  let agent: Awaited<ReturnType<typeof startAgentProcess>> | undefined;
  try {
    await makeBots(docker, ids, { image: TEST_IMAGE, network, benchLabel: runId });
    agent = await startAgentProcess(dataDir);
    const { port, child } = agent;
    const pid = child.pid!;
    while ((await gauge(port, /^bot_agent_indexed_bots (\d+)/m)) < BOTS) await new Promise((resolve) => setTimeout(resolve, 500));
    // Each bot's token, as the platform asks for it.
    const tokens = new Map<string, string>();
    for (const id of ids) tokens.set(id, (JSON.parse((await request(port, 'POST', `/api/admin/bots/${id}/token`)).body) as { token: string }).token);

    const rssBefore = rssMb(pid);
    const quietCpu = await cpuPercentDuring(() => [pid], () => new Promise((resolve) => setTimeout(resolve, QUIET_S * 1000)));

    const times: number[] = [];
    const statuses = new Map<number, number>();
    let rssMax = rssBefore;
    const gapMs = (EVERY_S * 1000) / BOTS;
    const beatingCpu = await cpuPercentDuring(() => [pid], async () => {
      const started = performance.now();
      const inFlight: Promise<void>[] = [];
      for (let n = 0; performance.now() - started < BEATING_S * 1000; n += 1) {
        const due = started + n * gapMs;
        const wait = due - performance.now();
        if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
        const id = ids[n % BOTS]!;
        const sent = performance.now();
        inFlight.push(
          request(port, 'POST', '/api/bots/self/heartbeat', { authorization: `Bot ${tokens.get(id)}` }).then(({ status }) => {
            times.push(performance.now() - sent);
            statuses.set(status, (statuses.get(status) ?? 0) + 1);
          }),
        );
        if (n % 200 === 0) rssMax = Math.max(rssMax, rssMb(pid));
      }
      await Promise.all(inFlight);
    });
    const healthy = await gauge(port, /^bot_agent_bots_health\{status="healthy"\} (\d+)/m);
    const held = await gauge(port, /^bot_agent_heartbeat_bots (\d+)/m);
    const { p50, p99 } = percentiles(times);
    const rate = round(BOTS / EVERY_S, 0);
    const written = writeSection(
      'health',
      `## Heartbeats and the watchdog

Made by \`npm run bench:health\` on ${new Date().toISOString().slice(0, 10)} with ${BOTS} idle bots on the real engine (${(await import('node:os')).cpus().length} cores), the agent in a process of its own (\`AGENT_IDENTITY=token\`: one client on the host beats for every bot with its token, over 32 kept-alive connections).

| what | figure |
|---|---|
| quiet, ${QUIET_S} s: the watchdog looking at ${BOTS} running bots each second | ${round(quietCpu, 1)}% of a core, RSS ${round(rssBefore, 1)} MB |
| every bot beating once each ${EVERY_S} s (${rate} beats a second) for ${BEATING_S} s | ${round(beatingCpu, 1)}% of a core, RSS at most ${round(rssMax, 1)} MB |
| a beat's time, p50 / p99 of ${times.length} | ${p50} ms / ${p99} ms |
| answers | ${[...statuses].map(([status, count]) => `${count} × ${status}`).join(', ')} |
| bots whose beat the agent holds (one map entry each; no runtime call, no database write per beat) | ${held} |
| bots the watchdog judged healthy at the end | ${healthy} |
`,
    );
    console.log(written);
  } finally {
    agent?.child.kill('SIGTERM');
    if (agent) await once(agent.child, 'exit');
    rmSync(dataDir, { recursive: true, force: true });
    await removeEverything(runId, network, true);
  }
}

await main();
