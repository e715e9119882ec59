// The fleet section of npm run bench (docs/api.md §17): what a call costs when the agent asked passes it to the
// node that holds the bot, beside the same call asked of that node's agent. Two agents over one PostgreSQL, one
// beside the shared engine and one beside an engine of its own (its own dockerd in a network namespace of its own),
// one bot on the second. Each kind of call is made ROUNDS times one after another on a kept-alive connection,
// the two ways interleaved round by round; the figures are medians and 99th percentiles in ms.
// Run as root, with the engine and PostgreSQL up (npm test's set-up starts both): npm run bench:fleet
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Agent, request } from 'undici';
import { createDockerDriver } from '../src/runtime/docker/docker-driver.js';
import { startAgent } from '../test/helpers/agent.js';
import { DockerFixture, TEST_IMAGE } from '../test/helpers/docker-fixture.js';
import { eventually } from '../test/helpers/eventually.js';
import { freePort } from '../test/helpers/free-port.js';
import { dropDatabases, freshDatabase } from '../test/helpers/postgres.js';
import { PrivateEngine } from '../test/helpers/private-engine.js';
import { writeSection } from './bench-sections.js';

const ROUNDS = 2_000;
const FLEET_KEY = randomBytes(24).toString('hex');

const percentile = (sorted: number[], p: number): number => Math.round((sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0) * 100) / 100;

async function main(): Promise<void> {
  process.env.BOT_AGENT_DATABASE_URL ??= execFileSync('bash', ['scripts/postgres.sh'], { encoding: 'utf8' }).trim().split('\n').at(-1);
  const fixture = new DockerFixture();
  const engine = new PrivateEngine('bench-fleet');
  await fixture.ready();
  await engine.start();
  await engine.withTestImage(fixture.docker);
  const botId = `bot_${process.pid}_1_benchfleet`;
  await engine.runBot(botId, 'i=0; while [ $i -lt 200 ]; do echo "line $i of the bench"; i=$((i+1)); done; trap "exit 0" TERM; while :; do sleep 1 & wait $!; done');
  const databaseUrl = await freshDatabase();
  const [portA, portB] = [await freePort(), await freePort()];
  const nodeA = await startAgent(createDockerDriver({ dockerHost: fixture.dockerHost }), { databaseUrl, node: 'node-a', nodeUrl: `http://127.0.0.1:${portA}`, fleetKey: FLEET_KEY, port: portA, readRate: 1_000_000 });
  const nodeB = await startAgent(createDockerDriver({ dockerHost: engine.dockerHost }), { databaseUrl, node: 'node-b', nodeUrl: `http://127.0.0.1:${portB}`, fleetKey: FLEET_KEY, port: portB, readRate: 1_000_000 });
  const connections = new Agent({ keepAliveTimeout: 30_000 });
  const ask = async (port: number, path: string, body?: unknown): Promise<number> => {
    const began = performance.now();
    const answer = await request(`http://127.0.0.1:${port}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      dispatcher: connections,
    });
    await answer.body.arrayBuffer();
    if (answer.statusCode !== 200) throw new Error(`${path}: ${answer.statusCode}`);
    return performance.now() - began;
  };
  try {
    // node-a passes the bot's calls on once node-b's agent has said it holds it.
    if (!(await eventually(async () => (await ask(portA, `/api/bots/${botId}`).then(() => true, () => false)), 30_000, 250))) throw new Error('node-a never answered for the bot');
    const calls = {
      status: (port: number) => ask(port, `/api/bots/${botId}`),
      'logs (tail 100)': (port: number) => ask(port, '/api/bots/logs', { bot_id: botId, lines: 100 }),
    };
    const rows: string[] = [];
    for (const [name, callOf] of Object.entries(calls)) {
      const local: number[] = [];
      const forwarded: number[] = [];
      for (let i = 0; i < 100; i += 1) await Promise.all([callOf(portB), callOf(portA)]);
      for (let i = 0; i < ROUNDS; i += 1) {
        local.push(await callOf(portB));
        forwarded.push(await callOf(portA));
      }
      local.sort((a, b) => a - b);
      forwarded.sort((a, b) => a - b);
      const [localP50, forwardedP50] = [percentile(local, 0.5), percentile(forwarded, 0.5)];
      rows.push(`| ${name} | ${localP50} | ${percentile(local, 0.99)} | ${forwardedP50} | ${percentile(forwarded, 0.99)} | +${Math.round((forwardedP50 - localP50) * 100) / 100} |`);
    }
    const body = [
      '## A fleet: a call passed to another node',
      '',
      `A call for a bot on node-b, asked of node-b's own agent (local) and of node-a's, which passes it on with the fleet key (docs/api.md §17): ${ROUNDS} of each, one at a time on a kept-alive connection, the two interleaved, ms. Both agents, the engines and PostgreSQL on this one machine, so the pass adds one loopback round trip, node-a's look-up of the bot's node in the database and its copy of the answer; between hosts, add their round trip.`,
      '',
      '| call | local p50 | local p99 | passed on p50 | passed on p99 | added (p50) |',
      '|---|---|---|---|---|---|',
      ...rows,
    ].join('\n');
    console.log(writeSection('fleet', body));
  } finally {
    await connections.close();
    await nodeA.close();
    await nodeB.close();
    await engine.destroy();
    await fixture.cleanup();
    await dropDatabases();
  }
}

await main();
