import { mkdtemp, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { pino } from 'pino';
import { assembleAgent } from '../../src/agent.js';
import type { StoredEvent } from '../../src/history/history-store.js';
import { listen } from '../../src/http/listen.js';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { createDockerProvisioner } from '../../src/runtime/docker/docker-provisioner.js';
import { TEST_APP_CONFIG } from '../helpers/agent.js';
import { DockerFixture, TEST_IMAGE } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { lineSink } from '../helpers/log-sink.js';

// Crash back-offs on the real engine (docs/api.md §13). Each agent here keeps to the bots made through it, as its
// watchdog does: an agent with a store of its own acts alone, and other agents share the engine.

const fixture = new DockerFixture();
const closers: Array<() => Promise<void>> = [];

interface BackOffAgent {
  server: Server;
  /** The bots it looks after: those made through it. */
  mine: Set<string>;
  events: StoredEvent[];
  logLines: string[];
  close(): Promise<void>;
}

/** An agent that restarts the bots in `mine`, its history in `dataDir` (in memory when undefined). */
async function startAgent(dataDir?: string, mine = new Set<string>()): Promise<BackOffAgent> {
  const driver = createDockerDriver({ dockerHost: fixture.dockerHost });
  const logLines: string[] = [];
  const events: StoredEvent[] = [];
  const made = assembleAgent({
    driver,
    provisioner: createDockerProvisioner({ dockerHost: fixture.dockerHost, network: (await fixture.network()).name, agentUrl: 'http://agent:8000' }),
    config: { ...TEST_APP_CONFIG, ...(dataDir === undefined ? {} : { dataDir }) },
    logger: pino(lineSink(logLines)),
    watchdog: { watches: (botId) => mine.has(botId) },
  });
  made.history.follow((event) => events.push(event));
  const server = await listen(made.app, '0.0.0.0', 0);
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    server.closeAllConnections();
    server.close();
    await made.close();
    await driver.close();
  };
  closers.push(close);
  return { server, mine, events, logLines, close };
}

let agent: BackOffAgent;

test.before(async () => {
  await fixture.ready();
  agent = await startAgent();
});

test.after.always(async () => {
  for (const close of closers) await close();
  await fixture.cleanup();
});

/** A bot created through `by`, and in its care; removed again when the test ends. */
async function create(t: { teardown(fn: () => Promise<void>): void }, by: BackOffAgent, extra: Record<string, unknown>) {
  const id = fixture.newBotId();
  by.mine.add(id);
  t.teardown(() => fixture.docker.getContainer(id).remove({ force: true }).catch(() => undefined));
  const body = { bot_id: id, user_id: 'user_9', image: TEST_IMAGE, template: 'telegram', token: 'tok-0123456789-secret-never-shown', ...extra };
  return { id, reply: await call(by.server, '/api/admin/bots', { body }) };
}

// The crash back-off of docs/api.md §13: from the second crash in the window, the bot waits backoff_s, doubling up to
// backoff_max_s, where the engine would restart it within a second: the engine's restarts are the agent's from
// the bot's first crash, until it has run its window without one. Each run crashes at once.
test('a bot that keeps crashing waits its back-off, doubling to its most, between runs; a stop through the agent ends the back-off', async (t) => {
  // Each run lasts 1.5 s: the engine restarts the first crash at once, and on a busy host its restarts were taken
  // (one call to the engine) more than half a second later, after a quicker second crash.
  const { id, reply } = await create(t, agent, { command: ['sh', '-c', 'echo crashing; sleep 1.5; exit 3'], restart_policy: { backoff_s: 2, backoff_max_s: 4 } });
  t.is(reply.status, 201, reply.text);
  const of = (type: string) => agent.events.filter((event) => event.botId === id && event.type === type).map((event) => ({ seq: event.seq, data: JSON.parse(event.data) as Record<string, unknown> }));
  t.true(await eventually(() => of('backing-off').length >= 3, 120_000, 100), `backed off ${of('backing-off').length} time(s)`);
  t.is((await fixture.docker.getContainer(id).inspect()).HostConfig.RestartPolicy?.Name, 'no', 'the engine still restarts its crashes');
  const [first, second, third] = of('backing-off');
  t.deepEqual([first, second, third].map((backOff) => backOff?.data.wait_s), [2, 4, 4]);
  t.deepEqual([first, second, third].map((backOff) => backOff?.data.crashes), [2, 3, 4]);
  // The first crash was restarted at once, by the engine; each later run began no earlier than its back-off's end.
  const crashes = of('exited').filter((exit) => (exit.data.exit as { requested?: boolean }).requested === false);
  const startOf = (exit: (typeof crashes)[number] | undefined) => Date.parse(String((exit?.data.exit as { started_at?: string } | undefined)?.started_at));
  // Told by order, not by time (a busy engine takes seconds to start a run again): no back-off came between the first
  // crash and the second, which ended a run the engine started after the first.
  t.true(crashes[1] !== undefined && crashes[1].seq < first!.seq, 'the first crash waited');
  t.true(startOf(crashes[1]) >= Date.parse(String((crashes[0]?.data.exit as { at?: string }).at)) - 1_000, 'the second run began after the first crash');
  for (const backOff of [first!, second!]) {
    const next = crashes.find((exit) => exit.seq > backOff.seq);
    t.true(startOf(next) >= Date.parse(String(backOff.data.until)), `a run began ${Date.parse(String(backOff.data.until)) - startOf(next)} ms before its back-off of ${String(backOff.data.wait_s)} s ended: ${JSON.stringify(of('exited').map((exit) => exit.data.exit))} ${agent.logLines.filter((line) => line.includes(id)).join('\n')}`);
  }
  // A stop through the agent during a back-off, sent as the next back-off begins (a run between two is 1.5 s, the
  // wait 4: a stop sent on seeing the bot not running could come at a wait's end on a busy host, and land in the next
  // run as a requested stop): the bot stays stopped past its end.
  const backOffsSoFar = of('backing-off').length;
  t.true(await eventually(() => of('backing-off').length > backOffsSoFar, 20_000, 20), 'never waiting its back-off again');
  const stopped = await call(agent.server, '/api/bots/stop', { body: { bot_id: id, user_id: 'user_9' } });
  t.is(stopped.status, 200, stopped.text);
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const lastUntil = Math.max(...of('backing-off').map((backOff) => Date.parse(String(backOff.data.until))));
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, lastUntil + 3_000 - Date.now())));
  t.false((await fixture.docker.getContainer(id).inspect()).State.Running, 'started again after a stop through the agent');
  // Its last run crashed (the stop found it waiting): exited, no longer crash-looping.
  const status = (await call(agent.server, `/api/bots/${id}`)).body?.bot as { state?: string } | undefined;
  const since = agent.events.filter((event) => event.botId === id && event.seq > (of('backing-off')[backOffsSoFar]?.seq ?? 0));
  t.is(status?.state, 'exited', `the bot's events from the back-off the stop came in: ${since.map((event) => `${event.type} ${event.data}`).join('\n')}\n${agent.logLines.filter((line) => line.includes(id)).slice(-12).join('\n')}`);
});

test("a bot's crashes go back to the engine once it has run its window without one", async (t) => {
  // Crashes on its first two runs (its file system keeps the count), then runs.
  const script = 'n=$(cat /tmp/runs 2>/dev/null || echo 0); n=$((n+1)); echo $n > /tmp/runs; [ $n -le 2 ] && exit 3; exec sleep 1000';
  const { id, reply } = await create(t, agent, { command: ['sh', '-c', script], restart_policy: { window_s: 10, backoff_s: 1 } });
  t.is(reply.status, 201, reply.text);
  const policy = async () => (await fixture.docker.getContainer(id).inspect()).HostConfig.RestartPolicy?.Name;
  t.true(await eventually(() => agent.events.some((event) => event.botId === id && event.type === 'backing-off'), 60_000, 100), `no back-off: ${agent.events.filter((event) => event.botId === id).map((event) => event.data).join('\n')} ${agent.logLines.join('\n')}`);
  // The event is the agent's claim on the back-off; the engine's policy is changed right after it (a moment later
  // on a busy machine), and stays so for the bot's window.
  t.true(await eventually(async () => (await policy()) === 'no', 10_000, 100), `its restarts were not taken from the engine: ${await policy()}`);
  t.true(await eventually(async () => (await fixture.docker.getContainer(id).inspect()).State.Running, 20_000, 100), 'not started after its back-off');
  t.true(await eventually(async () => (await policy()) === 'unless-stopped', 60_000, 500), `its restarts stayed the agent's: ${agent.logLines.filter((line) => line.includes(id)).join('\n')}`);
  t.true((await fixture.docker.getContainer(id).inspect()).State.Running);
});

// The wait is read back from the history: an agent that stops during a back-off leaves it to the next over the same data folder.
test('a crash back-off outlives its agent: the next agent over the same data folder starts the bot when its wait is over', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'bot-agent-data-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const first = await startAgent(dataDir);
  const { id, reply } = await create(t, first, { command: ['sh', '-c', 'echo crashing; sleep 0.5; exit 3'], restart_policy: { backoff_s: 15, backoff_max_s: 15 } });
  t.is(reply.status, 201, reply.text);
  t.true(await eventually(() => first.events.some((event) => event.botId === id && event.type === 'backing-off'), 60_000, 100), 'no back-off');
  const backOff = first.events.find((event) => event.botId === id && event.type === 'backing-off')!;
  const until = Date.parse(String((JSON.parse(backOff.data) as { until?: string }).until));
  await first.close();
  t.false((await fixture.docker.getContainer(id).inspect()).State.Running, 'not held stopped');

  await startAgent(dataDir, first.mine);
  t.true(Date.now() < until, 'the wait was over before the second agent began: the test proves nothing');
  t.true(await eventually(async () => Date.parse((await fixture.docker.getContainer(id).inspect()).State.StartedAt) >= until, 30_000, 200), 'never started after its back-off');
});
