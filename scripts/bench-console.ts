// npm run bench:console: what the operator's console costs and how it draws, with BENCH_BOTS (1,000) idle
// bots on the real engine. The samples behind its sparklines: the heap they and the held cgroup files
// take, and the CPU of a round of reading every bot (one each 15 s). Its table: the answer of
// GET /api/console/fleet, the time Debian's Chromium takes to draw it, and the frames while it scrolls.
// Writes its section of BENCHMARKS.md.
import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { assembleAgent } from '../src/agent.js';
import { loadConfig } from '../src/config.js';
import { listen } from '../src/http/listen.js';
import { dockerConnection } from '../src/runtime/docker/docker-connection.js';
import { createDockerDriver } from '../src/runtime/docker/docker-driver.js';
import { createDockerProvisioner } from '../src/runtime/docker/docker-provisioner.js';
import type { StatsSamples } from '../src/stats/stats-samples.js';
import { TEST_APP_CONFIG } from '../test/helpers/agent.js';
import { launchChromium } from '../test/helpers/browser.js';
import { TEST_IMAGE } from '../test/helpers/docker-fixture.js';
import { writeSection } from './bench-sections.js';
import { makeBots, percentiles, removeEverything, round } from './bench-scale.js';
import Docker from 'dockerode';

const BOTS = Number(process.env.BENCH_BOTS ?? 1000);
const ROUNDS = 61;
const runId = randomBytes(3).toString('hex');
const network = `bot-agent-bench-console-${runId}`;

const gc = (): void => (globalThis as { gc?: () => void }).gc?.();
/** The JavaScript heap and the memory of ArrayBuffers (the samples' typed arrays live there), after collection. */
const heapMb = (): number => {
  gc();
  gc();
  const { heapUsed, arrayBuffers } = process.memoryUsage();
  return (heapUsed + arrayBuffers) / 1024 / 1024;
};
const cpuMs = (): number => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

async function samplesFigures(samples: StatsSamples) {
  const before = heapMb();
  const firstStarted = Date.now();
  await samples.sample();
  const firstMs = Date.now() - firstStarted;
  const rounds: number[] = [];
  const cpu: number[] = [];
  // A round each 1.1 s until every bot has the 61 samples of 15 minutes, timed and measured.
  for (let i = 1; i < ROUNDS; i += 1) {
    // Reads within a second of the last are answered from it: a round a second later reads every bot anew.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const [started, used] = [Date.now(), cpuMs()];
    await samples.sample();
    rounds.push(Date.now() - started);
    cpu.push(cpuMs() - used);
  }
  const after = heapMb();
  const cpuPerRound = cpu.reduce((sum, ms) => sum + ms, 0) / cpu.length;
  return {
    bots: samples.bots,
    ringKb: round(samples.bytes / 1024, 1),
    heapMb: round(after - before, 2),
    firstMs,
    roundMs: percentiles(rounds).p50,
    cpuPerRoundMs: round(cpuPerRound, 1),
    // One round each 15 s: the share of one core the samples take.
    corePercent: round((cpuPerRound / 15_000) * 100, 2),
  };
}

/** The console's table at `url` (an agent's address): its answer, and how Debian's Chromium draws and scrolls it. */
export async function tableFigures(url: string) {
  const answers: number[] = [];
  let bytes = 0;
  for (let i = 0; i < 5; i += 1) {
    const started = performance.now();
    const response = await fetch(`${url}/api/console/fleet`);
    bytes = (await response.arrayBuffer()).byteLength;
    answers.push(performance.now() - started);
  }
  const browser = await launchChromium();
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const draws: number[] = [];
    for (let i = 0; i < 5; i += 1) {
      const started = performance.now();
      await page.goto(`${url}/?draw=${i}`);
      await page.locator('tr[data-bot]').first().waitFor();
      draws.push(performance.now() - started);
    }
    const rows = await page.locator('tr[data-bot]').count();
    // Scrolled to the end and back, a step each frame, while every frame's time is taken.
    const frames = (await page.evaluate(`new Promise((resolve) => {
      const scroller = document.querySelector('.scroller');
      const times = [];
      let last = performance.now();
      let step = 0;
      const frame = (now) => {
        times.push(now - last);
        last = now;
        step += 1;
        scroller.scrollTop = step < 150 ? step * 300 : (300 - step) * 300;
        if (step < 300) requestAnimationFrame(frame);
        else resolve(times.slice(1));
      };
      requestAnimationFrame(frame);
    })`)) as number[];
    const sorted = [...frames].sort((a, b) => a - b);
    return {
      answerMs: percentiles(answers).p50,
      answerKb: round(bytes / 1024, 1),
      drawMs: percentiles(draws).p50,
      rowsInDom: rows,
      frameP50: round(sorted[Math.floor(sorted.length / 2)] ?? NaN, 1),
      frameP95: round(sorted[Math.floor(sorted.length * 0.95)] ?? NaN, 1),
      frameMax: round(sorted.at(-1) ?? NaN, 1),
      slowFrames: frames.filter((ms) => ms > 50).length,
      frames: frames.length,
    };
  } finally {
    await browser.close();
  }
}

async function main(): Promise<void> {
  const { dockerHost } = loadConfig();
  const docker = new Docker(dockerConnection(dockerHost));
  await docker.createNetwork({ Name: network, Labels: { 'bot-agent-bench': runId } });
  process.on('SIGINT', () => void removeEverything(runId, network, false).then(() => process.exit(130)));
  const driver = createDockerDriver({ dockerHost });
  try {
    const ids = Array.from({ length: BOTS }, (_, i) => `bot_9_${i}_console${runId}`);
    await makeBots(docker, ids, { image: TEST_IMAGE, network, benchLabel: runId });
    const agent = assembleAgent({
      driver,
      provisioner: createDockerProvisioner({ dockerHost, network, agentUrl: 'http://agent:8000' }),
      config: TEST_APP_CONFIG,
      logger: pino({ level: 'silent' }),
      statsSamples: 'off',
    });
    const server = await listen(agent.app, '127.0.0.1', 0);
    // Every bot indexed as running before the samples are taken.
    while (driver.runningBots().length < BOTS) await new Promise((resolve) => setTimeout(resolve, 200));
    // The agent's own samples, filled by rounds the bench times (its timer is off), then drawn by the table.
    const samples = await samplesFigures(agent.samples);
    const fleet = await tableFigures(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    server.closeAllConnections();
    server.close();
    await agent.close();
    const body = [
      '## The console',
      '',
      `Made by \`npm run bench:console\` on ${new Date().toISOString().slice(0, 10)} with ${BOTS} idle bots on the real engine (2 cores), the agent in the bench's own process.`,
      '',
      `The samples behind the sparklines (docs/api.md §12), every running bot read once a round, 100 at a time, from its cgroup files:`,
      '',
      '| what | figure |',
      '|---|---|',
      `| bots with samples | ${samples.bots} |`,
      `| the samples' arrays (61 a bot, 20 bytes each) | ${samples.ringKb} KB |`,
      `| memory the samples and the reads' state add (heap and array buffers, after collection) | ${samples.heapMb} MB |`,
      `| the first round (each bot's first reading waits 1 s) | ${samples.firstMs} ms |`,
      `| a later round, p50 of ${ROUNDS - 1} | ${samples.roundMs} ms |`,
      `| CPU of a later round | ${samples.cpuPerRoundMs} ms |`,
      `| CPU at one round each 15 s | ${samples.corePercent}% of one core |`,
      '',
      "The table (`GET /api/console/fleet`, every bot's status and its 61 samples; Debian's Chromium through playwright-core, 1280 × 800):",
      '',
      '| what | figure |',
      '|---|---|',
      `| the answer, p50 of 5 | ${fleet.answerMs} ms, ${fleet.answerKb} KB |`,
      `| from opening the page to the table drawn, p50 of 5 | ${fleet.drawMs} ms |`,
      `| rows in the page at once (the rest are drawn as they scroll into sight) | ${fleet.rowsInDom} of ${BOTS} |`,
      `| frames while scrolling to the end and back, a step each frame | ${fleet.frames}: p50 ${fleet.frameP50} ms, p95 ${fleet.frameP95} ms, slowest ${fleet.frameMax} ms, ${fleet.slowFrames} over 50 ms |`,
    ].join('\n');
    console.log(writeSection('console', body));
  } finally {
    await driver.close();
    await removeEverything(runId, network, true);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
