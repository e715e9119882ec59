import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { runAgentProcess, webhookReceiver } from '../helpers/agent-process.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { SocketProxy } from '../helpers/socket-proxy.js';
import { openStream } from '../helpers/sse-client.js';

// The agent killed with SIGKILL and started again over the same AGENT_DATA_DIR: its exit records,
// its events after a cursor and its undelivered webhooks are all still there, and a bot's run that
// ended while it was down is recorded from the engine's replay of its events.

const SECRET = 'the webhook secret';
const fixture = new DockerFixture();

/** The agent over the local engine, its records in `dataDir`, its webhook going to `webhookUrl`. */
function runAgent(dataDir: string, webhookUrl: string) {
  return runAgentProcess({ AGENT_DATA_DIR: dataDir, AGENT_WEBHOOK_URL: webhookUrl, AGENT_WEBHOOK_SECRET: SECRET });
}

test.before(() => fixture.ready());
test.after.always(() => fixture.cleanup());

test('records, events after a cursor and pending webhooks survive a SIGKILL of the agent', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'bot-agent-data-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const hooks = await webhookReceiver(3, SECRET);
  t.teardown(() => hooks.server.close());

  const first = await runAgent(dataDir, hooks.url);
  t.teardown(() => first.process.kill('SIGKILL'));
  const everything = await openStream({ port: first.port }, '/api/events');
  const bot = await fixture.runBot({ script: 'echo "run $RANDOM$RANDOM"; exit 3', start: false });
  await bot.container.start();
  await everything.next((e) => e.event === 'exited' && e.data.bot_id === bot.id);
  const cursor = everything.events.find((e) => e.data.bot_id === bot.id && e.event === 'started')!.id!;
  t.true(await eventually(() => hooks.refusedCount() >= 1), 'the receiver has refused a delivery');
  first.process.kill('SIGKILL');
  await once(first.process, 'exit');

  // While no agent runs, the bot runs and dies again.
  await bot.container.start();
  await eventually(async () => !(await bot.container.inspect()).State.Running && (await bot.container.inspect()).State.FinishedAt !== '');
  await new Promise((resolve) => setTimeout(resolve, 300));

  const second = await runAgent(dataDir, hooks.url);
  t.teardown(() => second.process.kill('SIGKILL'));
  const exits = async (): Promise<Array<{ exit_code: number; logs: string }>> => {
    const reply = await fetch(`http://127.0.0.1:${second.port}/api/bots/${bot.id}/exits`);
    return ((await reply.json()) as { exits: Array<{ exit_code: number; logs: string }> }).exits;
  };
  t.true(await eventually(async () => (await exits()).length === 2, 20_000, 100), 'the run that ended while the agent was down is recorded');
  const [down, before] = await exits();
  t.is(down!.exit_code, 3);
  t.is(before!.exit_code, 3);
  t.regex(down!.logs, /^run \d+\n$/);
  t.regex(before!.logs, /^run \d+\n$/);
  t.not(down!.logs, before!.logs, "each record has its own run's lines");

  const resumed = await openStream({ port: second.port }, `/api/bots/${bot.id}/events`, { headers: { 'Last-Event-ID': cursor } });
  await resumed.next((e) => e.event === 'exited' && resumed.events.filter((x) => x.event === 'exited').length === 2);
  t.deepEqual(
    resumed.events.map((e) => e.event),
    ['exited', 'started', 'exited'],
    'exactly the events after the cursor, none twice',
  );
  const ids = [cursor, ...resumed.events.map((e) => e.id!)];

  // Every event of the bot reaches the receiver, signed, in order, none missing.
  t.true(await eventually(() => new Set(hooks.received.filter((d) => ids.includes(d.id)).map((d) => d.id)).size === ids.length, 60_000, 200));
  const ofBot = hooks.received.filter((d) => JSON.parse(d.body).bot_id === bot.id);
  t.true(ofBot.every((d) => d.signatureOk), 'every signature checks out');
  const order = ofBot.map((d) => Number(d.id));
  t.deepEqual(order, [...order].sort((a, b) => a - b), "one bot's deliveries arrive in order");
  t.deepEqual([...new Set(order)].map(String), ids);
  t.true(ofBot.every((d) => JSON.parse(d.body).type === d.type && JSON.parse(d.body).id === d.id));
  everything.close();
  resumed.close();
});

test("a run's end the agent was still recording when it was SIGKILLed is recorded by the next agent, though another bot's later start was kept first", async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'bot-agent-data-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const proxy = new SocketProxy();
  await proxy.start();
  t.teardown(() => proxy.close());
  const first = await runAgentProcess({ AGENT_DATA_DIR: dataDir, DOCKER_HOST: proxy.dockerHost });
  t.teardown(() => first.process.kill('SIGKILL'));
  const everything = await openStream({ port: first.port }, '/api/events');
  t.teardown(() => everything.close());
  const dying = await fixture.runBot({ script: 'echo "last words"; exit 3', start: false });
  // The agent reads a run's last lines before it keeps the exit: held at the proxy, the exit is not kept yet.
  const logsOfDying = new RegExp(`^GET \\S*/containers/${dying.container.id}/logs`);
  proxy.delay(logsOfDying, 120_000);
  await dying.container.start();
  t.true(await eventually(() => proxy.requests.some((line) => logsOfDying.test(line)), 20_000), "the agent never read the run's last lines");
  const later = await fixture.runBot();
  await everything.next((e) => e.event === 'started' && e.data.bot_id === later.id);
  t.false(everything.events.some((e) => e.event === 'exited' && e.data.bot_id === dying.id), 'the exit was kept before the kill');
  first.process.kill('SIGKILL');
  await once(first.process, 'exit');

  const second = await runAgentProcess({ AGENT_DATA_DIR: dataDir });
  t.teardown(() => second.process.kill('SIGKILL'));
  const exits = async (): Promise<Array<{ exit_code: number; logs: string }>> => {
    const reply = await fetch(`http://127.0.0.1:${second.port}/api/bots/${dying.id}/exits`);
    return ((await reply.json()) as { exits: Array<{ exit_code: number; logs: string }> }).exits ?? [];
  };
  t.true(await eventually(async () => (await exits()).length === 1, 20_000, 100), 'the exit is recorded by the next agent');
  t.like((await exits())[0], { exit_code: 3, logs: 'last words\n' });
});
