import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';
import test from 'ava';
import { DockerBotIndex } from '../../src/runtime/docker/docker-bot-index.js';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';

const run = promisify(execFile);
const dockerCli = existsSync('/usr/bin/docker') ? '/usr/bin/docker' : 'docker';
const fixture = new DockerFixture();

test.before(async () => {
  await fixture.ready();
});

test.after.always(async () => {
  await fixture.cleanup();
});

const addressOf = async (id: string): Promise<string> => {
  const networks = (await fixture.docker.getContainer(id).inspect()).NetworkSettings.Networks;
  return Object.values(networks)[0]?.IPAddress ?? '';
};

test('the index follows the engine: a bot started later is known by its address, and forgotten once stopped', async (t) => {
  const index = new DockerBotIndex(fixture.docker);
  t.teardown(() => index.close());
  t.true(await eventually(() => index.botAt('10.255.255.254') !== null), 'the index never came up');
  const bot = await fixture.runBot();
  const address = await addressOf(bot.id);
  t.true(await eventually(() => index.botAt(address)?.botId === bot.id));
  t.like(index.bot(bot.id), { running: true, tty: false });
  await bot.container.stop({ t: 1 });
  t.true(await eventually(() => index.botAt(address) === undefined));
  t.like(index.bot(bot.id), { running: false, addresses: [] });
});

test('the index knows no container without the bot label', async (t) => {
  const index = new DockerBotIndex(fixture.docker);
  t.teardown(() => index.close());
  const stranger = await fixture.runBot({ labelled: false });
  const address = await addressOf(stranger.id);
  t.true(await eventually(() => index.botAt(address) !== null));
  t.is(index.botAt(address), undefined);
  t.is(index.bot(stranger.id), undefined);
});

test('a bot started just before its first call is identified', async (t) => {
  const driver = createDockerDriver({ dockerHost: fixture.dockerHost });
  t.teardown(() => driver.close());
  await driver.botAtAddress('127.0.0.1');
  const bot = await fixture.runBot();
  t.is(await driver.botAtAddress(await addressOf(bot.id)), bot.id);
});

// Serial: on two cores, other tests' containers would take CPU from the busy bot.
test.serial('stats match what docker stats shows for the same busy container', async (t) => {
  const driver = createDockerDriver({ dockerHost: fixture.dockerHost });
  t.teardown(() => driver.close());
  const bot = await fixture.runBot({ script: "trap 'exit 0' TERM; while :; do :; done" });
  await driver.stats(bot.id);
  // Both read over the same second: the agent's latest sample, and the CLI's own two readings.
  const [cli, ours] = await Promise.all([
    run(dockerCli, ['stats', '--no-stream', '--format', '{{.CPUPerc}} {{.MemUsage}}', bot.id]),
    new Promise((resolve) => setTimeout(resolve, 1_100)).then(() => driver.stats(bot.id)),
  ]);
  const [cpu = '', used = ''] = cli.stdout.trim().split(' ');
  const cliCpu = Number.parseFloat(cpu);
  const cliMemoryMiB = Number.parseFloat(used) * ({ KiB: 1 / 1024, MiB: 1, GiB: 1024 }[used.replace(/[\d.]/g, '')] ?? NaN);
  t.true(Math.abs(ours.cpuPercent - cliCpu) < 15, `agent ${ours.cpuPercent.toFixed(1)}% vs docker stats ${cliCpu}%`);
  t.true(cliCpu > 25, `docker stats ${cliCpu}%`);
  t.true(Math.abs(ours.memoryBytes / 1024 / 1024 - cliMemoryMiB) < 1, `agent ${ours.memoryBytes} B vs docker stats ${used}`);
});
