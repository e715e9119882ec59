// A bot's restart through the agent, its history in PostgreSQL: its latency with the database up,
// stopped (pg_ctl stop) and frozen (SIGSTOP of the server's every process), on the real engine,
// against a server of this script's own (scripts/postgres.sh in its own folder, on port 25434).
// Prints the figures and writes them into BENCHMARKS.md between its markers (npm run bench keeps them).
// Run as root, with the engine up: npm run bench:outage
import { mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { assembleAgent } from '../src/agent.js';
import { listen } from '../src/http/listen.js';
import { createDockerDriver } from '../src/runtime/docker/docker-driver.js';
import { TEST_APP_CONFIG } from '../test/helpers/agent.js';
import { DockerFixture } from '../test/helpers/docker-fixture.js';
import { OwnPostgres } from '../test/helpers/postgres.js';
import { writeSection } from './bench-sections.js';

const RESTARTS = 15;

const fixture = new DockerFixture();
const server = new OwnPostgres('bench-outage', 25434);

function percentile(sorted: number[], share: number): number {
  return Math.round(sorted[Math.min(sorted.length - 1, Math.floor(share * sorted.length))] ?? 0);
}

async function main(): Promise<void> {
  await fixture.ready();
  const databaseUrl = await server.freshDatabase(await server.start());
  const made = assembleAgent({
    driver: createDockerDriver({ dockerHost: fixture.dockerHost }),
    config: { ...TEST_APP_CONFIG, databaseUrl, dataDir: mkdtempSync(join(tmpdir(), 'bench-outage-')), rateLimit: 10_000 },
    logger: pino({ level: 'silent' }),
  });
  await made.opened();
  const http = await listen(made.app, '127.0.0.1', 0);
  const port = (http.address() as AddressInfo).port;
  const bot = await fixture.runBot();
  const restarts = async (): Promise<{ p50: number; p99: number; max: number; failed: number }> => {
    const times: number[] = [];
    let failed = 0;
    for (let i = 0; i < RESTARTS; i += 1) {
      const began = performance.now();
      const reply = await fetch(`http://127.0.0.1:${port}/api/bots/restart`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ bot_id: bot.id, user_id: 'user_1' }),
      });
      await reply.arrayBuffer();
      if (reply.status !== 200) failed += 1;
      times.push(performance.now() - began);
    }
    times.sort((a, b) => a - b);
    return { p50: percentile(times, 0.5), p99: percentile(times, 0.99), max: Math.round(times.at(-1) ?? 0), failed };
  };
  const rows: Array<[string, Awaited<ReturnType<typeof restarts>>]> = [];
  try {
    await restarts();
    rows.push(['database up', await restarts()]);
    await server.stop();
    rows.push(['database stopped', await restarts()]);
    await server.start();
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    server.freeze();
    rows.push(['database frozen (SIGSTOP)', await restarts()]);
  } finally {
    server.thaw();
    await server.stop();
    http.closeAllConnections();
    http.close();
    await made.close();
    await fixture.cleanup();
  }
  const table = [
    '| the history\'s database | restarts | p50 ms | p99 ms | slowest ms | failed |',
    '|---|---|---|---|---|---|',
    ...rows.map(([what, figures]) => `| ${what} | ${RESTARTS} | ${figures.p50} | ${figures.p99} | ${figures.max} | ${figures.failed} |`),
  ].join('\n');
  const section = [
    '## Restarts while PostgreSQL is away',
    '',
    `Made by \`npm run bench:outage\` on ${new Date().toISOString().slice(0, 10)}: one agent over the real engine, its history in PostgreSQL (a server of its own on loopback), ${RESTARTS} restarts of one bot one after another, each timed from the request to the answer. While the database is away the rate limit is counted in the agent (the shared window is asked for at most 1 s, then left alone for 5 s) and what the restart records waits in the spool.`,
    '',
    table,
  ].join('\n');
  console.log(writeSection('outage', section));
}

await main();
