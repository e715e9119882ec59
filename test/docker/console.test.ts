import { mkdtemp, readdir, readFile, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { createServer, get } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import type { Browser, Page } from 'playwright-core';
import { pino } from 'pino';
import { assembleAgent } from '../../src/agent.js';
import type { Agent } from '../../src/agent.js';
import { listen } from '../../src/http/listen.js';
import { StatsSamples } from '../../src/stats/stats-samples.js';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { createDockerProvisioner } from '../../src/runtime/docker/docker-provisioner.js';
import { accessibilityViolations, launchChromium, othersRemoved, watchPage } from '../helpers/browser.js';
import { TEST_APP_CONFIG } from '../helpers/agent.js';
import { DockerFixture, IDLE_BOT, TEST_IMAGE } from '../helpers/docker-fixture.js';
import type { TestBot } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { createdIdleBot } from '../helpers/idle-bot.js';
import { pushedImage, REGISTRY_LOGIN, testRegistry } from '../helpers/registry.js';

// The operator's console in a real Chromium (Debian's, driven by playwright-core), against the agent on the
// real engine: what an operator sees and does, checked on the engine afterwards.
const fixture = new DockerFixture();
const TOKEN = 'console-admin-token-0123456789abcdef0123';
let browser: Browser;
const agents: { agent: Agent; server: Server }[] = [];

async function startAgent(config: Partial<typeof TEST_APP_CONFIG> = {}, statsSamples: { intervalMs: number } = { intervalMs: 1_000 }): Promise<{ url: string; port: number; agent: Agent; server: Server }> {
  const driver = createDockerDriver({ dockerHost: fixture.dockerHost });
  const network = (await fixture.network()).name;
  const agent = assembleAgent({
    driver,
    // The operator's login for the test registry (AGENT_REGISTRY_AUTH): a deploy from the page pulls with it.
    provisioner: createDockerProvisioner({ dockerHost: fixture.dockerHost, network, agentUrl: 'http://agent:8000', registryLogins: new Map([[testRegistry(), REGISTRY_LOGIN]]), registries: [testRegistry(), 'docker.io'] }),
    config: { ...TEST_APP_CONFIG, ...config },
    logger: pino({ level: 'silent' }),
    statsSamples,
    // This file's bots only: other files' bots on the same engine are theirs to restart.
    watchdog: { watches: (botId) => botId.endsWith(fixture.runId) },
  });
  // On every address: the bots' containers reach it through their network's gateway.
  const server = await listen(agent.app, '0.0.0.0', 0);
  agents.push({ agent, server });
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, port, agent, server };
}

/** Closes one of the agents startAgent made, before the file ends. */
async function stopAgent(started: { agent: Agent; server: Server }): Promise<void> {
  agents.splice(agents.findIndex((one) => one.agent === started.agent), 1);
  started.server.closeAllConnections();
  started.server.close();
  await started.agent.close();
}

let loopback: { url: string; port: number };

test.before(async () => {
  await fixture.ready();
  [browser, loopback] = await Promise.all([launchChromium(), startAgent()]);
});

test.after.always(async () => {
  await browser?.close();
  for (const { agent, server } of agents) {
    server.closeAllConnections();
    server.close();
    await agent.close();
  }
  await fixture.cleanup();
});

/** A bot that idles until /tmp/crash exists, then (and at every start after) says its last words and exits 3. */
const CRASHER = `[ -f /tmp/crash ] && { echo "last words of run $(date +%s%N)"; exit 3; }; while [ ! -f /tmp/crash ]; do sleep 0.1; done; echo "last words of run $(date +%s%N)"; exit 3`;

/** Writes a line to the bot's own stdout, as the bot itself would. */
const say = (bot: TestBot, line: string) => fixture.exec(bot, `echo '${line}' > /proc/1/fd/1`);

async function openFleet(page: Page, url: string): Promise<void> {
  await page.goto(`${url}/`);
  // Other test files' bots share the engine: the search keeps this file's in view.
  await page.getByLabel('Search').fill(fixture.runId);
}

/** Other test files' bots come and go on the shared engine (othersRemoved). */
const OTHERS_REMOVED = othersRemoved(fixture.runId);

const row = (page: Page, bot: TestBot) => page.locator(`tr[data-bot="${bot.id}"]`);

test.serial('the fleet lists the running bots; a bot that begins crash-looping shows it, unreloaded, and its timeline shows the exit code and its last line', async (t) => {
  const [idle, crasher] = await Promise.all([fixture.runBot(), fixture.runBot({ script: CRASHER, restartPolicy: 'always' })]);
  const page = await browser.newPage();
  const problems = watchPage(page, { expected: OTHERS_REMOVED });
  await openFleet(page, loopback.url);
  await row(page, idle).locator('.badge.running').waitFor();
  await row(page, crasher).locator('.badge.running').waitFor();

  await fixture.exec(crasher, 'touch /tmp/crash');
  const began = Date.now();
  await row(page, crasher).locator('.badge.crash-looping').waitFor({ timeout: 15_000 });
  const shownAfter = Date.now() - began;
  // How soon is a figure, logged, not a verdict (a busy machine's engine backs off longer): that it shows, unreloaded, is.
  t.log(`crash-looping shown ${shownAfter} ms after the first crash was caused`);

  await row(page, crasher).getByRole('link').click();
  const newest = page.locator('ol.timeline li.crash').first();
  await newest.waitFor();
  // The bot goes on crashing: newer records come on top while the test reads this one.
  const at = await newest.locator('time').getAttribute('datetime');
  const crash = page.locator(`ol.timeline li.crash:has(time[datetime="${at}"])`);
  t.regex(await crash.locator('summary').innerText(), /code 3, crashed/);
  await crash.locator('summary').click();
  await crash.locator('pre').waitFor();
  t.regex(await crash.locator('pre').innerText(), /last words of run \d+/);
  t.deepEqual(problems, []);
  await page.close();
});

test.serial('a bot whose health check starts failing shows unhealthy in the fleet, unreloaded, and its page says why', async (t) => {
  const bot = await fixture.runBot({ healthcheck: 'test -f /tmp/ok || { echo "no gateway"; exit 1; }', script: `touch /tmp/ok; ${IDLE_BOT}` });
  // Healthy first, as the table reads it (a turn to healthy sends no event: the table sees it at its next reading).
  const healthInFleet = async () =>
    ((await (await fetch(`${loopback.url}/api/console/fleet`)).json()) as { bots: { bot_id: string; health: { status: string } }[] }).bots.find((b) => b.bot_id === bot.id)?.health.status;
  t.true(await eventually(async () => (await healthInFleet()) === 'healthy', 30_000, 200), 'the check never passed');
  const page = await browser.newPage();
  const problems = watchPage(page, { expected: OTHERS_REMOVED });
  await openFleet(page, loopback.url);
  await row(page, bot).locator('.badge.health-healthy').waitFor({ timeout: 15_000 });
  await fixture.exec(bot, 'rm /tmp/ok');
  // The engine says so after two failed checks a second apart; the page is timed from then.
  t.true(await eventually(async () => (await bot.container.inspect()).State.Health?.Status === 'unhealthy', 15_000, 50));
  const marked = Date.now();
  await row(page, bot).locator('.badge.health-unhealthy').waitFor({ timeout: 15_000 });
  const shownAfter = Date.now() - marked;
  // A figure, logged, not a verdict: that it shows, unreloaded, is.
  t.log(`unhealthy shown ${shownAfter} ms after the engine marked it`);
  await row(page, bot).getByRole('link').click();
  await page.getByTestId('health-output').getByText(/no gateway/).waitFor();
  t.deepEqual(problems, []);
  await page.close();
  // Left unhealthy, the watchdog would restart it in 30 s: this test is done with it before that.
  await bot.container.remove({ force: true });
});

test.serial('a line the bot prints appears in the live tail within 1 s; the tail follows the bot across a restart made with the page\'s button; stop and start from the page change the real container', async (t) => {
  const bot = await fixture.runBot({ script: IDLE_BOT.replace('; while', '; echo first run; while') });
  const page = await browser.newPage();
  const problems = watchPage(page, { expected: OTHERS_REMOVED });
  await page.goto(`${loopback.url}/#/bots/${bot.id}`);
  const log = page.getByTestId('log');
  await log.getByText('first run').waitFor();

  await say(bot, 'printed while the page was open');
  const printed = Date.now();
  await log.getByText('printed while the page was open').waitFor({ timeout: 5_000 });
  const tailDelay = Date.now() - printed;
  // A figure, logged, not a verdict: that it arrives live, unreloaded, is.
  t.log(`a new line reached the tail ${tailDelay} ms after it was written`);

  const before = await fixture.startedAt(bot);
  await page.getByRole('button', { name: 'Restart', exact: true }).click();
  await page.getByRole('button', { name: 'Yes, restart' }).click();
  await page.getByTestId('answer').getByText(/restarted/i).waitFor({ timeout: 30_000 });
  t.not(await fixture.startedAt(bot), before, 'the container was not restarted');
  await log.getByText(/the run ended/).waitFor({ timeout: 5_000 });
  await say(bot, 'printed by the second run');
  await log.getByText('printed by the second run').waitFor({ timeout: 5_000 });
  const text = await log.innerText();
  t.true(text.indexOf('printed while the page was open') < text.indexOf('the run ended'), text);
  t.true(text.indexOf('the run ended') < text.indexOf('printed by the second run'), text);

  // The filter keeps the lines it matches (and the marks of runs' ends); the download is what is shown.
  await page.getByLabel('Filter').fill('print(ed)? by the SECOND');
  await log.getByText('printed while the page was open').waitFor({ state: 'detached' });
  const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download' }).click()]);
  t.is(download.suggestedFilename(), `${bot.id}-logs.txt`);
  const downloaded = await readFile(await download.path(), 'utf8');
  t.regex(downloaded, /the run ended[^\n]*\nprinted by the second run\n$/);
  t.notRegex(downloaded, /first run|page was open/);
  await page.getByLabel('Filter').fill('(unclosed');
  await page.getByText('not a regular expression').waitFor();
  await page.getByLabel('Filter').fill('');
  // Paused, the tail holds what comes and shows it on resume.
  await page.getByRole('button', { name: 'Pause' }).click();
  await say(bot, 'printed while paused');
  await page.waitForTimeout(500);
  t.notRegex(await log.innerText(), /printed while paused/);
  // A flood while paused: the page holds the newest 5,000 lines, as it draws them, and says how many older ones left.
  await fixture.exec(bot, 'seq 1 8000 | sed "s/^/flood /" > /proc/1/fd/1');
  await page.getByText('paused, 5000 waiting, 3001 older dropped').waitFor({ timeout: 10_000 });
  await page.getByRole('button', { name: 'Resume' }).click();
  await log.getByText('flood 8000', { exact: true }).waitFor({ timeout: 5_000 });
  const resumed = await log.innerText();
  t.notRegex(resumed, /printed while paused/, 'the oldest line held was kept past the bound');
  t.regex(resumed, /(^|\n)flood 3001\n/);
  t.notRegex(resumed, /(^|\n)flood 3000\n/);

  await page.getByRole('button', { name: 'Stop', exact: true }).click();
  await page.getByRole('button', { name: 'Yes, stop' }).click();
  await page.getByTestId('answer').getByText(/stopped/i).waitFor({ timeout: 30_000 });
  t.false(await fixture.running(bot), 'the container still runs after Stop');
  await page.getByTestId('state').getByText('stopped').waitFor();

  await page.getByRole('button', { name: 'Start', exact: true }).click();
  await page.getByRole('button', { name: 'Yes, start' }).click();
  await page.getByTestId('answer').getByText(/started/i).waitFor({ timeout: 30_000 });
  t.true(await fixture.running(bot), 'the container does not run after Start');
  t.deepEqual(problems, []);
  await page.close();
});

/** The texts of a chart's axes as drawn, once it has drawn `samples` samples or more. */
async function chartAxes(page: Page, label: string, samples: number): Promise<{ x: string[]; y: string[]; samples: number }> {
  const chart = page.locator('.charts').getByRole('img', { name: new RegExp(`^${label}:`) });
  const ready = await eventually(
    async () => Number(await chart.getAttribute('data-samples', { timeout: 1_000 }).catch(() => -1)) >= samples && (await chart.getAttribute('data-y-ticks', { timeout: 1_000 }).catch(() => null)) !== null,
    30_000,
    200,
  );
  if (!ready) throw new Error(`the ${label} chart never drew ${samples} samples`);
  const [x, y, drawn] = await Promise.all([chart.getAttribute('data-x-ticks'), chart.getAttribute('data-y-ticks'), chart.getAttribute('data-samples')]);
  return { x: (x ?? '').split('|'), y: (y ?? '').split('|'), samples: Number(drawn) };
}

/** The time axis reads minutes of the operator's clock, each once; a value axis reads each tick once, with its unit. */
function axesReadRight(t: ExecutionContext, axes: { x: string[]; y: string[] }, unit: RegExp, what: string): void {
  t.true(axes.x.length >= 3 && axes.x.every((tick) => /^\d\d:\d\d$/.test(tick)), `${what}: time ticks ${axes.x.join(', ')}`);
  t.is(new Set(axes.x).size, axes.x.length, `${what}: time ticks ${axes.x.join(', ')}`);
  t.true(axes.y.length >= 2 && axes.y.every((tick) => unit.test(tick)), `${what}: value ticks ${axes.y.join(', ')}`);
  t.is(new Set(axes.y).size, axes.y.length, `${what}: value ticks ${axes.y.join(', ')}`);
}

test.serial("the live tail marks the ends of the runs before it opened, between each run's lines, as it marks those after", async (t) => {
  const bot = await fixture.runBot({ script: `echo "run began $(date +%s%N)"; ${IDLE_BOT}` });
  const exits = async () => ((await (await fetch(`${loopback.url}/api/bots/${bot.id}/exits`)).json()) as { exits: unknown[] }).exits.length;
  for (const ended of [1, 2]) {
    await bot.container.restart({ t: 0 });
    t.true(await eventually(async () => (await exits()) >= ended, 20_000, 100), `exit ${ended} never recorded`);
  }
  const page = await browser.newPage();
  const problems = watchPage(page, { expected: OTHERS_REMOVED });
  await page.goto(`${loopback.url}/#/bots/${bot.id}`);
  const tail = page.getByTestId('log');
  await tail.getByText(/run began/).nth(2).waitFor();
  const shown = (await tail.locator('span.line').allInnerTexts()).map((line) => line.trim()).filter((line) => line.startsWith('run began') || line.startsWith('──'));
  t.deepEqual(
    shown.map((line) => (line.startsWith('──') ? 'end' : 'run')),
    ['run', 'end', 'run', 'end', 'run'],
    shown.join('\n'),
  );
  t.regex(shown[1]!, /^── the run ended .*: code \d+, .* ──$/);
  t.deepEqual(problems, []);
  await page.close();
});

test.serial("a bot's charts read right with no sample, one and sixty, and are drawn the same after the agent restarts", async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'console-samples-'));
  const [busy, never] = await Promise.all([fixture.runBot(), fixture.runBot({ start: false })]);
  // What an agent kept of the busy bot's last 15 minutes, a sample each 15 s, in its data folder.
  // 61 of them, the oldest 10 s short of ageing out.
  let at = Date.now() - 61 * 15_000 + 10_000;
  const earlier = new StatsSamples(
    { runningBots: () => [busy.id], stats: async () => ({ cpuPercent: 1.5 + Math.sin(at), memoryBytes: 600_000 + (at % 7) * 1_000, memoryPercent: 0, memoryLimitBytes: 0, startedAt: new Date(0), io: { networkRxBytes: at / 1_000, networkTxBytes: at / 2_000, blockReadBytes: 0, blockWriteBytes: 0 } }) },
    { file: join(dataDir, 'stats-samples'), now: () => at },
  );
  for (let round = 0; round < 61; round += 1) {
    at += 15_000;
    await earlier.sample();
  }
  await earlier.close();
  const quick = await startAgent({ dataDir });
  const count = async (url: string, bot: TestBot) => ((await (await fetch(`${url}/api/bots/${bot.id}/stats/history`)).json()) as { samples: unknown[] }).samples.length;
  t.true((await count(quick.url, busy)) >= 60);
  const page = await browser.newPage();
  const problems = watchPage(page, { expected: OTHERS_REMOVED });
  await page.goto(`${quick.url}/#/bots/${busy.id}`);
  const sixty = await chartAxes(page, 'Memory', 60);
  axesReadRight(t, sixty, /^\d+(\.\d+)? (B|KiB|MiB)$/, 'memory, 60 samples');
  axesReadRight(t, await chartAxes(page, 'CPU', 60), /^\d+(\.\d+)? %$/, 'CPU, 60 samples');
  axesReadRight(t, await chartAxes(page, 'Network', 60), /^\d+(\.\d+)? (B|KiB|MiB)\/s$/, 'network, 60 samples');

  // The agent restarts (an upgrade): the next life draws at once what the last one kept, its own samples included.
  // The page leaves first: its streams from the agent would end unfinished.
  await page.goto('about:blank');
  await stopAgent(quick);
  const again = await startAgent({ dataDir });
  const kept = await count(again.url, busy);
  t.true(kept >= 60, `${kept} samples after the restart`);
  await page.goto(`${again.url}/#/bots/${busy.id}`);
  axesReadRight(t, await chartAxes(page, 'Memory', 60), /^\d+(\.\d+)? (B|KiB|MiB)$/, 'memory after the restart');
  await page.goto('about:blank');
  await stopAgent(again);

  // One sample: an agent sampling once an hour, asked for one round, of a bot started after its first.
  const slow = await startAgent({}, { intervalMs: 3_600_000 });
  const once = await fixture.runBot();
  // Once the agent's index has seen it start: each round before that finds it not running.
  t.true(await eventually(async () => (await slow.agent.samples.sample(), await count(slow.url, once)) > 0, 15_000, 100));
  t.is(await count(slow.url, once), 1);
  await page.goto(`${slow.url}/#/bots/${once.id}`);
  axesReadRight(t, await chartAxes(page, 'Memory', 1), /^\d+(\.\d+)? (B|KiB|MiB)$/, 'memory, 1 sample');
  axesReadRight(t, await chartAxes(page, 'CPU', 1), /^\d+(\.\d+)? %$/, 'CPU, 1 sample');

  // None: a bot that never ran.
  t.is(await count(slow.url, never), 0);
  await page.goto(`${slow.url}/#/bots/${never.id}`);
  await page.getByText('No samples yet').waitFor();
  axesReadRight(t, await chartAxes(page, 'Memory', 0), /^\d+(\.\d+)? (B|KiB|MiB)$/, 'memory, no sample');
  t.deepEqual(problems, []);
  await page.close();
  await stopAgent(slow);
});

test.serial('the fleet shows each bot\'s image, revision and node, and stops and starts a bot from its row, asking first; the real container follows', async (t) => {
  const id = await createdIdleBot(t, fixture, agents[0]!.server);
  const page = await browser.newPage();
  const problems = watchPage(page, { expected: OTHERS_REMOVED });
  await page.goto(`${loopback.url}/`);
  await page.getByLabel('Search').fill(id);
  const line = page.locator(`tr[data-bot="${id}"]`);
  await line.locator('.badge.running').waitFor();
  const cells = await line.locator('td').allInnerTexts();
  t.true(cells.includes(TEST_IMAGE), cells.join(' | '));
  t.true(cells.includes('1'), 'revision 1');
  t.true(cells.includes((await (await fetch(`${loopback.url}/api/bots/${id}`)).json() as { bot: { node: string } }).bot.node), cells.join(' | '));
  t.true(await line.getByRole('button', { name: `Start ${id}`, exact: true }).isDisabled(), 'start is not offered to a running bot');
  // Stop asks first: cancelled, the bot runs on.
  await line.getByRole('button', { name: `Stop ${id}`, exact: true }).click();
  await page.getByRole('dialog').getByText('The bot stops until it is started again.').waitFor();
  await page.getByRole('button', { name: 'Cancel' }).click();
  t.true((await fixture.docker.getContainer(id).inspect()).State.Running, 'stopped without being confirmed');
  await line.getByRole('button', { name: `Stop ${id}`, exact: true }).click();
  await page.getByRole('button', { name: 'Yes, stop' }).click();
  await page.getByTestId('row-answer').getByText(new RegExp(`^${id}: .*stopped`)).waitFor({ timeout: 30_000 });
  t.false((await fixture.docker.getContainer(id).inspect()).State.Running);
  await line.locator('.badge.stopped').waitFor();
  await line.getByRole('button', { name: `Start ${id}`, exact: true }).click();
  await page.getByRole('button', { name: 'Yes, start' }).click();
  await page.getByTestId('row-answer').getByText(new RegExp(`^${id}: .*started`)).waitFor({ timeout: 30_000 });
  t.true((await fixture.docker.getContainer(id).inspect()).State.Running);
  await line.locator('.badge.running').waitFor();
  t.deepEqual(problems, []);
  await page.close();
});

test.serial("a deploy from a bot's page: its progress live, the new revision's outcome, the rollback button; a failed pull says why; the real container follows", async (t) => {
  const id = await createdIdleBot(t, fixture, agents[0]!.server);
  const original = (await fixture.docker.getContainer(id).inspect()).Config.Image;
  const image = await pushedImage(fixture.docker, 'console-deploy');
  const page = await browser.newPage();
  // The failed pull's 422 is one the page shows as it should.
  const problems = watchPage(page, { expected: [...OTHERS_REMOVED, /status of 422/, /^422 PATCH /] });
  await page.goto(`${loopback.url}/#/bots/${id}`);
  const revisions = page.getByTestId('revisions');
  await revisions.locator('tr[data-revision="1"] td.outcome').getByText('succeeded').waitFor();
  await revisions.locator('tr.current[data-revision="1"]').getByText('(runs now)').waitFor();
  await page.getByLabel('Image').fill(image);
  await page.getByLabel('Up for (s)').fill('1');
  // Deploy asks first, as Restart and Stop do: cancelled, nothing is deployed.
  await page.getByRole('button', { name: 'Deploy' }).click();
  await page.getByRole('dialog').getByText(`The bot stops and runs ${image} as a new revision, judged for 1 s, and undone if it fails.`).waitFor();
  await page.getByRole('button', { name: 'Cancel' }).click();
  await page.getByRole('dialog').waitFor({ state: 'hidden' });
  t.is(await revisions.locator('tr[data-revision="2"]').count(), 0, 'deployed without being confirmed');
  await page.getByRole('button', { name: 'Deploy' }).click();
  await page.getByRole('button', { name: 'Yes, deploy' }).click();
  await page.getByTestId('deploy-answer').getByText(/revision 2 started/).waitFor({ timeout: 30_000 });
  // The pull and the deploy's steps show as they happen, without a reload.
  await page.locator('ol.events').getByText(/^pulled .* in [\d.]+ s$/).waitFor({ timeout: 10_000 }).catch(async (err: unknown) => {
    t.log(await page.locator('ol.events').innerText());
    throw err;
  });
  await page.getByTestId('deploy-progress').getByText(/revision 2 deployed/).waitFor({ timeout: 30_000 });
  await revisions.locator('tr[data-revision="2"] td.outcome').getByText('succeeded').waitFor();
  await revisions.locator('tr.current[data-revision="2"]').getByText('(runs now)').waitFor();
  t.is(await revisions.getByText('(runs now)').count(), 1);
  t.is((await fixture.docker.getContainer(id).inspect()).Config.Image, image);

  await page.getByRole('button', { name: 'Roll back' }).click();
  await page.getByRole('button', { name: 'Yes, roll back' }).click();
  await page.getByTestId('deploy-answer').getByText(/rolled back from revision 2 to revision 1/).waitFor({ timeout: 30_000 });
  await revisions.locator('tr[data-revision="2"] td.outcome').getByText(/rolled-back/).waitFor();
  // Both revisions say rolled-back or succeeded: the mark says which one runs.
  await revisions.locator('tr.current[data-revision="1"]').getByText('(runs now)').waitFor();
  t.is((await fixture.docker.getContainer(id).inspect()).Config.Image, original);

  await page.getByLabel('Image').fill(`${image.replace(/:v1$/, '')}:no-such-tag`);
  await page.getByRole('button', { name: 'Deploy' }).click();
  await page.getByRole('button', { name: 'Yes, deploy' }).click();
  await page.getByTestId('deploy-answer').getByText(/was not found in its registry/).waitFor({ timeout: 30_000 });
  // Told as the pull's failure, live; a pull that failed takes no revision (docs/api.md §15).
  await page.locator('ol.events').getByText(/^pull failed: image .* was not found/).waitFor({ timeout: 10_000 });
  const listed = (await call(agents[0]!.server, `/api/bots/${id}/revisions`)).body?.revisions as { revision: number }[];
  t.deepEqual(listed.map((one) => one.revision), [2, 1]);
  t.is(await revisions.locator('tr[data-revision="3"]').count(), 0);
  t.true((await fixture.docker.getContainer(id).inspect()).State.Running, 'the bot runs on');
  t.deepEqual(problems, []);
  await page.close();
});

test.serial("a bot's schedules on its page: next runs in the operator's time, run now asked first and its run listed, turned off; the fleet shows the next action", async (t) => {
  const { server } = agents[0]!;
  const id = await createdIdleBot(t, fixture, server);
  const made = await call(server, `/api/admin/bots/${id}/schedules`, {
    body: { name: 'nightly', cron: '30 3 * * *', time_zone: 'Europe/Berlin', actions: [{ type: 'command', command: ['sh', '-c', 'echo hello from the schedule > /tmp/scheduled'] }] },
  });
  t.is(made.status, 201, made.text);
  const schedule = made.body?.schedule as { id: string; next_due_at: string[] };
  const page = await browser.newPage();
  const problems = watchPage(page, { expected: OTHERS_REMOVED });
  await page.goto(`${loopback.url}/#/bots/${id}`);
  const listed = page.getByTestId('schedules').locator(`tr[data-schedule="${schedule.id}"]`);
  // 03:30 in Berlin, shown as the operator's own clock shows it.
  const first = await page.evaluate((iso) => new Date(iso).toLocaleString(), schedule.next_due_at[0]!);
  await listed.getByTestId('next-runs').getByText(first).waitFor();
  await listed.getByRole('button', { name: 'Run now' }).click();
  await page.getByRole('dialog').getByText('Its actions run now, in order: command.').waitFor();
  await page.getByRole('button', { name: 'Yes, run now' }).click();
  await page.getByTestId('schedule-runs').locator('tr[data-state="succeeded"]').waitFor({ timeout: 30_000 }).catch(async (err: unknown) => {
    t.log(await page.getByTestId('schedule-runs').innerText(), JSON.stringify((await call(server, `/api/bots/${id}/schedules/${schedule.id}/runs`)).body));
    throw err;
  });
  t.is((await fixture.exec({ id, container: fixture.docker.getContainer(id) }, 'cat /tmp/scheduled')).trim(), 'hello from the schedule');

  await openFleet(page, loopback.url);
  await page.locator(`tr[data-bot="${id}"]`).getByTestId('next-schedule').getByText(/^command at /).waitFor({ timeout: 20_000 });

  await page.goto(`${loopback.url}/#/bots/${id}`);
  await listed.getByRole('button', { name: 'Turn off' }).click();
  await listed.getByTestId('next-runs').getByText('off').waitFor();
  t.false(((await call(server, `/api/admin/bots/${id}/schedules/${schedule.id}`)).body?.schedule as { enabled: boolean }).enabled);
  t.deepEqual(problems, []);
  await page.close();
});

test.serial("a bot's data and backups on its page: back up now and restore, each asked first; verify; the data on the engine follows", async (t) => {
  const withBackups = await startAgent({ backupDir: await mkdtemp(join(tmpdir(), 'bot-agent-console-backups-')) });
  const { server } = agents.at(-1)!;
  const id = await createdIdleBot(t, fixture, server, { data: [{ path: '/data', size_mb: 64 }] });
  t.teardown(async () => {
    for (const volume of (await fixture.docker.listVolumes({ filters: { label: [`bot-agent/bot-id=${id}`] } })).Volumes ?? []) await fixture.docker.getVolume(volume.Name).remove().catch(() => undefined);
  });
  const sh = async (script: string) => (await fixture.exec({ id, container: fixture.docker.getContainer(id) }, script)).trim();
  await sh('echo kept > /data/state');
  const page = await browser.newPage();
  const problems = watchPage(page, { expected: OTHERS_REMOVED });
  await page.goto(`${withBackups.url}/#/bots/${id}`);
  await page.getByTestId('data-folders').getByText('/data: not measured yet').waitFor();
  await page.getByRole('button', { name: 'Back up now' }).click();
  await page.getByRole('dialog').getByText('The bot is stopped while its data folders are copied, then started again.').waitFor();
  await page.getByRole('button', { name: 'Yes, back up' }).click();
  await page.getByTestId('backup-answer').getByText(/^backup bak_\S+ of bot .* made/).waitFor({ timeout: 30_000 });
  const [backup] = (await call(server, `/api/admin/bots/${id}/backups`)).body?.backups as { id: string }[];
  const row = page.getByTestId('backups').locator(`tr[data-backup="${backup!.id}"]`);
  await row.getByTestId('verified').getByText('not yet').waitFor();
  await row.getByRole('button', { name: 'Verify' }).click();
  await row.getByTestId('verified').getByText(/^yes, /).waitFor({ timeout: 30_000 });

  await sh('echo changed > /data/state');
  await row.getByRole('button', { name: 'Restore' }).click();
  await page.getByRole('dialog').getByText(/Its data as it is now is kept as a backup first\./).waitFor();
  await page.getByRole('button', { name: 'Yes, restore' }).click();
  await page.getByTestId('backup-answer').getByText(new RegExp(`^backup ${backup!.id} of bot ${id} restored into bot ${id}`)).waitFor({ timeout: 60_000 });
  t.is(await sh('cat /data/state'), 'kept', 'the restore put the backup back on the engine');
  // The list is read again once the answer is shown: a loaded machine draws it a moment later.
  const rows = page.getByTestId('backups').locator('tr[data-backup]');
  await rows.nth(1).waitFor({ timeout: 30_000 }).catch(() => undefined);
  t.is(await rows.count(), 2, 'the data before the restore is listed as a backup of its own');
  t.deepEqual(problems, []);
  await page.close();
});

test.serial('with a token set, the page asks for it and refuses a wrong one; a page of another site cannot use the session; a bot asking for the page gets 403', async (t) => {
  const guarded = await startAgent({ adminToken: TOKEN, loopbackPlatform: false });
  const bot = await fixture.runBot();
  const context = await browser.newContext();
  const page = await context.newPage();
  // The page's own 403s before the token is given are how it learns to ask for it.
  const problems = watchPage(page, { expected: [...OTHERS_REMOVED, /^403 GET .*\/api\/(console\/fleet|events)/, /^403 POST .*\/api\/session/, /status of 403/] });
  await page.goto(`${guarded.url}/`);
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  t.is(await page.getByRole('button', { name: 'Sign out' }).count(), 0, 'Sign out offered before signing in');
  await page.getByLabel('Admin token').fill('not-the-token-0123456789abcdef0123456');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('alert').getByText(/not the admin token/).waitFor();
  await page.getByLabel('Admin token').fill(TOKEN);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByLabel('Search').fill(fixture.runId);
  await row(page, bot).waitFor();
  const [cookie] = await context.cookies(guarded.url);
  t.like(cookie, { name: 'bot_agent_session', httpOnly: true, sameSite: 'Strict', path: '/' });
  t.true(cookie!.expires * 1000 - Date.now() > 11.9 * 3600 * 1000);

  // Another site (localhost is not 127.0.0.1's site) in the same browser, which holds the session.
  const foreign = createServer((_request, response) => response.end('<!doctype html><title>elsewhere</title><h1>elsewhere</h1>'));
  await new Promise<void>((resolve) => foreign.listen(0, '127.0.0.1', resolve));
  t.teardown(() => foreign.close());
  const elsewhere = await context.newPage();
  await elsewhere.goto(`http://localhost:${(foreign.address() as AddressInfo).port}/`);
  const attempts = await elsewhere.evaluate(async (agent) => {
    const read = await fetch(`${agent}/api/console/fleet`, { credentials: 'include' }).then(
      (response) => `read ${response.status}`,
      (err: Error) => `read refused: ${err.name}`,
    );
    // A form-like POST needs no preflight; the browser sends it with the cookie only were it same-site.
    const act = await fetch(`${agent}/api/bots/stop`, { method: 'POST', mode: 'no-cors', credentials: 'include', body: '{}' }).then(
      () => 'sent',
      (err: Error) => `refused: ${err.name}`,
    );
    return { read, act };
  }, guarded.url);
  t.is(attempts.read, 'read refused: TypeError', 'the foreign page read the fleet');
  t.true(await fixture.running(bot));

  // The cookie itself, sent by a page of another site (a browser that ignored SameSite): refused.
  const session = `${cookie!.name}=${cookie!.value}`;
  // node:http, since fetch leaves out a Host of its own.
  const asked = (headers: Record<string, string>) =>
    new Promise<number>((resolve, reject) => {
      get(`${guarded.url}/api/console/fleet`, { headers: { cookie: session, ...headers } }, (response) => {
        response.resume();
        resolve(response.statusCode ?? 0);
      }).on('error', reject);
    });
  t.is(await asked({}), 200);
  t.is(await asked({ origin: 'https://evil.example' }), 403);
  t.is(await asked({ 'sec-fetch-site': 'cross-site' }), 403);
  t.is(await asked({ host: 'rebound.evil.example' }), 403);

  const target = { host: (await fixture.network()).gateway, port: guarded.port };
  const asBot = await fixture.httpFromBot(bot, target, { method: 'GET', path: '/', headers: { accept: 'text/html' } });
  t.is(asBot.status, 403, asBot.raw);
  t.regex(String(asBot.body?.msg), /console is the platform's/);
  const assetAsBot = await fixture.httpFromBot(bot, target, { method: 'GET', path: '/console/nothing.js' });
  t.is(assetAsBot.status, 403, assetAsBot.raw);
  const fleetAsBot = await fixture.httpFromBot(bot, target, { method: 'GET', path: '/api/console/fleet', headers: { cookie: session } });
  t.is(fleetAsBot.status, 403, fleetAsBot.raw);

  // Signed out: the same cookie is nobody.
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  t.is(await page.getByRole('button', { name: 'Sign out' }).count(), 0, 'Sign out offered once signed out');
  t.is(await asked({}), 403);
  t.deepEqual(problems, []);
  await context.close();
});

test.serial('no console error, no failed request, no serious accessibility finding; the bundle is small; screenshots for docs/console.md', async (t) => {
  const bots = await Promise.all([fixture.runBot({ owner: 'user_7' }), fixture.runBot({ owner: 'user_8', script: "trap 'exit 0' TERM; i=0; while :; do i=$((i+1)); echo \"tick $i: all is well\"; sleep 0.5; done" })]);
  const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
  const problems = watchPage(page, { expected: OTHERS_REMOVED });
  await openFleet(page, loopback.url);
  await row(page, bots[1]).waitFor();
  // Owners come from the bots' labels, as the driver's index holds them.
  t.is(await row(page, bots[0]).locator('td').nth(1).innerText(), 'user_7');
  // The sparklines need a few samples (one a second here).
  t.true(await eventually(async () => (await row(page, bots[1]).locator('polyline').count()) === 2, 20_000), 'no sparklines');
  t.deepEqual(await accessibilityViolations(page), [], 'fleet');
  await page.screenshot({ path: 'docs/images/console-fleet.png' });
  await row(page, bots[1]).getByRole('link').click();
  await page.getByTestId('log').getByText('tick').first().waitFor();
  await page.locator('.charts figure canvas').first().waitFor();
  t.deepEqual(await accessibilityViolations(page), [], 'one bot');
  await page.screenshot({ path: 'docs/images/console-bot.png', fullPage: true });
  await page.goto(`${loopback.url}/#/events`);
  await page.getByRole('heading', { name: 'Events' }).waitFor();
  // The kept events first: this bot's start is among them, with a link to it.
  await page.locator('ol.events li.started').getByRole('link', { name: bots[1].id }).waitFor();
  t.deepEqual(await accessibilityViolations(page), [], 'events');
  // A phone's width: nothing wider than the screen but the table's own scroller.
  await page.setViewportSize({ width: 390, height: 800 });
  await page.goto(`${loopback.url}/`);
  await page.getByLabel('Search').waitFor();
  const { scrollWidth, innerWidth } = await page.evaluate('({ scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth })') as { scrollWidth: number; innerWidth: number };
  t.true(scrollWidth <= innerWidth + 1, `the page is ${scrollWidth} px wide on a ${innerWidth} px screen`);
  t.deepEqual(problems, []);

  const folder = 'dist/console';
  const files = [join(folder, 'index.html'), ...(await readdir(join(folder, 'assets'))).map((name) => join(folder, 'assets', name))];
  let gzipped = 0;
  for (const file of files) gzipped += gzipSync(await readFile(file), { level: 9 }).length;
  const raw = (await Promise.all(files.map((file) => stat(file)))).reduce((sum, { size }) => sum + size, 0);
  t.log(`the console: ${files.length} files, ${(raw / 1024).toFixed(1)} KB, ${(gzipped / 1024).toFixed(1)} KB gzipped (target: under 150 KB)`);
  t.true(gzipped < 150 * 1024);
  await page.close();
});

test.serial("a bot's page and the fleet search the kept output: matches marked, a line opened in the minute around it", async (t) => {
  const kept = await startAgent({ logHistory: { ratePerSecond: 200, retention: { days: 7, botBytes: 100_000_000, totalBytes: 1_000_000_000 } } });
  const word = `needle${fixture.runId}`;
  const bot = await fixture.runBot({ script: `echo "before the match"; echo "a ${word} in a line"; echo "after the match"; ${IDLE_BOT}` });
  const found = async () =>
    ((await (await fetch(`${kept.url}/api/bots/${bot.id}/logs/history?q=${word}`)).json()) as { lines?: unknown[] }).lines?.length ?? 0;
  t.true(await eventually(async () => (await found()) === 1, 30_000, 250), 'the line was never kept');
  const page = await browser.newPage();
  const problems = watchPage(page, { expected: OTHERS_REMOVED });
  await page.goto(`${kept.url}/#/bots/${bot.id}`);
  await page.getByLabel('Lines with').fill(word);
  await page.getByRole('button', { name: 'Search', exact: true }).click();
  const match = page.getByTestId('history-line');
  await match.first().waitFor();
  t.is(await match.count(), 1);
  t.is(await match.locator('mark').innerText(), word, 'the match is marked');
  await match.getByRole('button', { name: 'in context' }).click();
  const context = page.locator('ol.history-lines li');
  await page.getByTestId('context-line').waitFor();
  t.deepEqual((await context.locator('code').allInnerTexts()).filter((line) => line.includes('the match') || line.includes(word)), ['before the match', `a ${word} in a line`, 'after the match']);
  t.is(await page.getByTestId('context-line').locator('code').innerText(), `a ${word} in a line`, 'the line opened is marked in its context');
  // The fleet's search: whose line, on which node.
  await page.goto(`${kept.url}/`);
  await page.getByLabel('Lines with').fill(word);
  await page.getByRole('button', { name: 'Search', exact: true }).click();
  await page.getByTestId('history-line').first().waitFor();
  t.regex(await page.getByTestId('history-line').first().innerText(), new RegExp(`${bot.id} on \\S+`));
  t.deepEqual(problems, []);
  await page.close();
});
