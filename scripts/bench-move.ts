// A move of a bot with a large data folder between two nodes of a fleet (docs/api.md §17, §19): two agents run as
// operators run them (src/main.ts, with the image's V8 flags and malloc arenas: see the Dockerfile), one beside the
// shared engine and one beside an engine of its own (its own dockerd in a network namespace), over one PostgreSQL.
// The bot's folder holds N MiB of random bytes (1,024 unless given: npm run bench:move -- 256). Reports the move's
// time, the bot's time stopped, and each agent's peak resident memory above its rest (the data is streamed agent
// to agent: the target is within 64 MB of rest however large the folder).
// Prints the figures and writes them into BENCHMARKS.md between its markers.
// Run as root, with the engine and PostgreSQL up (npm test's set-up starts both): npm run bench:move
import { execFileSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BOT_LABEL } from '../src/runtime/labels.js';
import { runAgentProcess } from '../test/helpers/agent-process.js';
import { DockerFixture, IDLE_BOT, TEST_IMAGE } from '../test/helpers/docker-fixture.js';
import { eventually } from '../test/helpers/eventually.js';
import { fleetNodeEnv } from '../test/helpers/fleet-node-env.js';
import { freePort } from '../test/helpers/free-port.js';
import { dropDatabases, freshDatabase } from '../test/helpers/postgres.js';
import { PrivateEngine } from '../test/helpers/private-engine.js';
import { writeSection } from './bench-sections.js';

/** The agent's own flags and environment for memory, as the Dockerfile and scripts/start.sh run it. */
const AGENT_NODE_FLAGS = ['--max-semi-space-size=2', '--heap-growing-percent=30', '--no-allocation-site-pretenuring', '--expose-gc'];
const mib = Number(process.argv[2] ?? 1_024);
const ADMIN_TOKEN = randomBytes(20).toString('hex');
const FLEET_KEY = randomBytes(24).toString('hex');

process.env.BOT_AGENT_DATABASE_URL ??= execFileSync('bash', ['scripts/postgres.sh'], { encoding: 'utf8' }).trim().split('\n').at(-1);
const fixture = new DockerFixture();
const engine = new PrivateEngine('bench-move');
const dirs: string[] = [];
const processes: ChildProcess[] = [];
await fixture.ready();
await engine.start();
await engine.withTestImage(fixture.docker);
const databaseUrl = await freshDatabase();

async function node(name: string, dockerHost: string) {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), `bench-move-${name}-`));
  dirs.push(dataDir);
  const env = {
    ...fleetNodeEnv({ name, port, dataDir, databaseUrl, fleetKey: FLEET_KEY, dockerHost }),
    AGENT_BOTS_NETWORK: 'none',
    AGENT_ADMIN_TOKEN: ADMIN_TOKEN,
    AGENT_RATE_LIMIT: '1000',
    MALLOC_ARENA_MAX: '2',
  };
  const agent = await runAgentProcess(env, { nodeFlags: AGENT_NODE_FLAGS });
  processes.push(agent.process);
  return { port, pid: agent.process.pid! };
}

const api = async (port: number, path: string, body?: unknown) => {
  const reply = await fetch(`http://127.0.0.1:${port}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30 * 60_000),
  });
  const answer = (await reply.json()) as Record<string, unknown>;
  if (!reply.ok) throw new Error(`${path}: ${reply.status} ${JSON.stringify(answer)}`);
  return answer;
};

const rssMb = (pid: number): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

const bots: string[] = [];
try {
  const a = await node('node-a', fixture.dockerHost);
  const b = await node('node-b', engine.dockerHost);
  const create = async (botId: string) => {
    bots.push(botId);
    await api(a.port, '/api/admin/bots', { bot_id: botId, user_id: 'user_1', image: TEST_IMAGE, template: 'n8n', token: '-', command: ['sh', '-c', IDLE_BOT], data: [{ path: '/data' }] });
  };
  const fill = (botId: string, script: string) => fixture.exec({ id: botId, container: fixture.docker.getContainer(botId) }, script);
  // A first move of a few bytes: the code every step runs is loaded in both agents before their rest is taken.
  const warm = fixture.newBotId();
  await create(warm);
  await fill(warm, 'echo warm > /data/warm');
  await api(a.port, `/api/admin/bots/${warm}/move`, { node: 'node-b' });

  const botId = fixture.newBotId();
  await create(botId);
  // Random bytes: gzip gains nothing on them, as on a bot's already-compressed files.
  await fill(botId, `head -c ${mib * 1024 * 1024} /dev/urandom > /data/blob; sync`);
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const rest = { a: rssMb(a.pid), b: rssMb(b.pid) };
  const peak = { ...rest };
  // The bot's time stopped: from the first sample that finds it not running on node-a to its start on node-b.
  let stoppedAt: number | undefined;
  const old = fixture.docker.getContainer(botId);
  const sampler = setInterval(() => {
    peak.a = Math.max(peak.a, rssMb(a.pid));
    peak.b = Math.max(peak.b, rssMb(b.pid));
    if (stoppedAt === undefined) {
      void old.inspect().then(
        (info) => void (info.State.Running ? undefined : (stoppedAt ??= Date.now())),
        () => void (stoppedAt ??= Date.now()),
      );
    }
  }, 50);
  const began = performance.now();
  await api(a.port, `/api/admin/bots/${botId}/move`, { node: 'node-b' });
  const ms = performance.now() - began;
  clearInterval(sampler);
  const there = engine.docker().getContainer(botId);
  await eventually(async () => (await there.inspect()).State.Running, 30_000, 200);
  const startedAt = Date.parse((await there.inspect()).State.StartedAt);
  const size = execFileSync('/usr/bin/docker', ['-H', engine.dockerHost, 'exec', botId, 'sh', '-c', 'wc -c < /data/blob'], { encoding: 'utf8' }).trim();
  if (Number(size) !== mib * 1024 * 1024) throw new Error(`the moved bot's folder holds ${size} bytes, not ${mib * 1024 * 1024}`);
  const body = [
    `A move of a bot with ${mib} MiB of random bytes in its data folder between two nodes (each an agent process as operators run it, one engine each, one PostgreSQL), on this machine (npm run bench:move):`,
    '',
    '| measure | result |',
    '|---|---|',
    `| the move, asked to answered (stopped, backed up, streamed agent to agent, checked, restored, started) | ${(ms / 1000).toFixed(1)} s |`,
    `| the bot's time stopped (not running on node-a to started on node-b) | ${stoppedAt === undefined ? 'not seen' : `${((startedAt - stoppedAt) / 1000).toFixed(1)} s`} |`,
    `| old node's agent memory above rest | ${Math.round(peak.a - rest.a)} MB |`,
    `| new node's agent memory above rest | ${Math.round(peak.b - rest.b)} MB |`,
    '',
    `Target: each agent within 64 MB of its rest (resident memory, sampled every 50 ms). The moved bot's folder on node-b holds all ${size} bytes.`,
  ].join('\n');
  console.log(body);
  writeSection('move', body);
} finally {
  for (const child of processes) child.kill('SIGTERM');
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  for (const botId of bots) {
    for (const docker of [fixture.docker, engine.docker()]) {
      await docker.getContainer(botId).remove({ force: true, v: true }).catch(() => undefined);
      for (const volume of (await docker.listVolumes({ filters: { label: [`${BOT_LABEL}=${botId}`] } })).Volumes ?? []) await docker.getVolume(volume.Name).remove().catch(() => undefined);
    }
  }
  await engine.destroy();
  await dropDatabases();
  await fixture.cleanup();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
}
