import { execFileSync } from 'node:child_process';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import type { ExitRecord } from '../../clients/typescript/src/index.js';
import { createDockerDriver } from '../../src/runtime/docker/docker-driver.js';
import { startAgent } from '../helpers/agent.js';
import type { TestAgent } from '../helpers/agent.js';
import { DockerFixture } from '../helpers/docker-fixture.js';
import type { TestBot } from '../helpers/docker-fixture.js';
import { eventually } from '../helpers/eventually.js';
import { call } from '../helpers/http-client.js';
import { openStream } from '../helpers/sse-client.js';
import { SocketProxy } from '../helpers/socket-proxy.js';

// Why a bot died (docs/api.md §8-9) on the real engine: each way a run can end, as its exit record says it.

const fixture = new DockerFixture();
let agent: TestAgent;
/** The agent as bot containers reach it. */
let target: { host: string; port: number };
// Long enough for a busy host's exit records (their last lines are read first): at 3 s a loop's third record came
// after the next run had lasted that long, and the loop ended as it began.
const RECOVER_AFTER_MS = 8_000;

test.before(async () => {
  await fixture.ready();
  agent = await startAgent(createDockerDriver({ dockerHost: fixture.dockerHost }), { recoverAfterMs: RECOVER_AFTER_MS }, '0.0.0.0');
  target = { host: (await fixture.network()).gateway, port: (agent.server.address() as AddressInfo).port };
});

test.after.always(async () => {
  await agent?.close();
  await fixture.cleanup();
});

async function exitsOf(bot: { id: string }, limit?: number): Promise<ExitRecord[]> {
  const reply = await call(agent.server, `/api/bots/${bot.id}/exits${limit ? `?limit=${limit}` : ''}`);
  if (reply.status !== 200) throw new Error(`exits of ${bot.id}: ${reply.status} ${reply.text}`);
  return reply.body?.exits as ExitRecord[];
}

/** Waits until the bot has `count` exit records, and answers them, newest first. */
async function awaitExits(bot: { id: string }, count: number): Promise<ExitRecord[]> {
  let exits: ExitRecord[] = [];
  const seen = await eventually(async () => (exits = await exitsOf(bot)).length >= count, 20_000, 100);
  if (!seen) throw new Error(`bot ${bot.id} has ${exits.length} exit records, not ${count}`);
  return exits;
}

async function statusOf(bot: { id: string }): Promise<Record<string, unknown>> {
  const reply = await call(agent.server, `/api/bots/${bot.id}`);
  if (reply.status !== 200) throw new Error(`status of ${bot.id}: ${reply.status} ${reply.text}`);
  return reply.body?.bot as Record<string, unknown>;
}

async function started(bot: TestBot): Promise<void> {
  await eventually(async () => (await bot.container.inspect()).State.Running, 10_000, 50);
}

test('a bot that exits 3 by itself: code 3, no signal, not requested, its last lines; the state says exited', async (t) => {
  const bot = await fixture.runBot({ script: 'for i in $(seq 1 150); do echo "line $i"; done; sleep 0.2; echo "fatal: no token" >&2; exit 3' });
  const [exit] = await awaitExits(bot, 1);
  t.like(exit, { exit_code: 3, signal: null, oom_killed: false, requested: false });
  const lines = exit!.logs.trimEnd().split('\n');
  t.is(lines.length, 100, 'the last 100 lines of the run');
  // (stdout and stderr are two pipes, which the engine reads apart: hence the pause before the last line.)
  t.is(lines.at(-1), 'fatal: no token');
  t.is(lines[0], 'line 52');
  const info = (await bot.container.inspect()).State;
  t.is(exit!.started_at, new Date(info.StartedAt).toISOString());
  // The engine says `die` once the run's output is copied, up to 2 s after it recorded the end.
  t.true(Math.abs(Date.parse(exit!.at) - Date.parse(info.FinishedAt)) < 2_500, 'when the engine says it ended');
  t.like(await statusOf(bot), { bot_id: bot.id, user_id: 'user_1', state: 'exited', started_at: null, uptime: null, crashes_last_hour: 1 });
  t.deepEqual((await statusOf(bot)).last_exit, exit);
});

test('a bot killed with SIGKILL through the engine: 137, SIGKILL, requested', async (t) => {
  const bot = await fixture.runBot({ script: 'echo alive; exec sleep 1000' });
  await eventually(async () => (await fixture.docker.getContainer(bot.id).logs({ stdout: true })).toString().includes('alive'));
  await bot.container.kill({ signal: 'SIGKILL' });
  const [exit] = await awaitExits(bot, 1);
  t.like(exit, { exit_code: 137, signal: 'SIGKILL', oom_killed: false, requested: true });
  t.regex(exit!.logs, /alive/);
  t.is((await statusOf(bot)).state, 'stopped');
});

test('a bot killed by the kernel for memory: oom_killed, not requested', async (t) => {
  // A shell variable that doubles until the 16 MiB limit stops it, once containerd watches the container's memory
  // (a kill before that is known to no runtime: docs/api.md §8).
  const bot = await fixture.runBot({ script: 'sleep 2; echo allocating; x=0123456789abcdef; while :; do x="$x$x"; done; echo survived', memoryBytes: 16 * 1024 * 1024 });
  const [exit] = await awaitExits(bot, 1);
  t.like(exit, { oom_killed: true, requested: false, exit_code: 137, signal: 'SIGKILL' });
  t.regex(exit!.logs, /allocating/);
  t.notRegex(exit!.logs, /survived/);
  t.is((await statusOf(bot)).state, 'exited');
});

/** An agent of its own that reaches the engine through a proxy of its socket; both closed with the test. */
async function agentBehindProxy(t: ExecutionContext): Promise<{ proxy: SocketProxy; agent: TestAgent }> {
  const proxy = new SocketProxy();
  await proxy.start();
  const behind = await startAgent(createDockerDriver({ dockerHost: proxy.dockerHost }), {});
  t.teardown(async () => {
    await behind.close();
    await proxy.close();
  });
  return { proxy, agent: behind };
}

test('a kill for memory the engine reports after the exit (as it may under load) is still oom_killed', async (t) => {
  const { proxy, agent: late } = await agentBehindProxy(t);
  // Allocating after a pause, as above.
  const bot = await fixture.runBot({ script: 'sleep 2; echo allocating; x=0123456789abcdef; while :; do x="$x$x"; done', memoryBytes: 16 * 1024 * 1024, start: false });
  proxy.holdAnswers(['"Action":"oom"', bot.container.id], ['"Action":"die"', bot.container.id]);
  // The agent's watch of the engine's events is open before the bot starts.
  await eventually(() => proxy.requests.some((line) => line.includes('/events')));
  await bot.container.start();
  let exit: ExitRecord | undefined;
  await eventually(async () => {
    exit = ((await call(late.server, `/api/bots/${bot.id}/exits`)).body?.exits as ExitRecord[] | undefined)?.[0];
    return exit !== undefined;
  });
  t.like(exit, { oom_killed: true, requested: false, exit_code: 137, signal: 'SIGKILL' });
});

/**
 * A bot whose first run writes `first` lines and exits 4, and whose next run, started at once by the restart
 * policy, writes `next` lines and stays; the agent's reads of the logs held (within their 1.5 s deadline) until
 * the next run has written. Answers the first run's exit record and the engine's logs requests for the bot.
 */
async function crashThenNextRun(t: ExecutionContext, first: number, next: number): Promise<{ exit: ExitRecord; reads: string[] }> {
  const { proxy, agent: slow } = await agentBehindProxy(t);
  const script =
    `if [ -e /tmp/ran ]; then i=0; while [ $i -lt ${next} ]; do echo "next $i"; i=$((i+1)); done; exec sleep 1000; fi; ` +
    `touch /tmp/ran; i=1; while [ $i -le ${first} ]; do echo "first $i"; i=$((i+1)); done; exit 4`;
  const bot = await fixture.runBot({ script, restartPolicy: 'on-failure', start: false });
  await eventually(() => proxy.requests.some((line) => line.includes('/events')));
  proxy.delay(/\/logs\?/, 1_000);
  await bot.container.start();
  let exit: ExitRecord | undefined;
  await eventually(async () => (exit = ((await call(slow.server, `/api/bots/${bot.id}/exits`)).body?.exits as ExitRecord[] | undefined)?.[0]) !== undefined, 30_000);
  if (!exit) throw new Error('no exit record');
  t.true((await fixture.docker.getContainer(bot.id).logs({ stdout: true, tail: 1 })).toString().includes(`next ${next - 1}`), 'the next run had written its lines');
  return { exit, reads: proxy.requests.filter((line) => line.includes(`/containers/${bot.container.id}/logs`)) };
}

test('a run restarted at once keeps its own last lines though the next run wrote more than an exit record holds before they were read', async (t) => {
  const { exit, reads } = await crashThenNextRun(t, 5, 300);
  t.like(exit, { exit_code: 4, requested: false });
  t.is(exit.logs, 'first 1\nfirst 2\nfirst 3\nfirst 4\nfirst 5\n');
  // Done once the tail reaches past the run's start (903 entries here); before, it widened on to 1,503 and 2,103.
  // (Counted by tail, not by calls: under load a read past its deadline is tried again from the start.)
  const tails = reads.map((line) => Number(/[?&]tail=(\d+)/.exec(line)?.[1]));
  t.true(Math.max(...tails) <= 1_000, `tails asked for: ${tails.join(', ')}`);
});

test("an exit record's read asks for at most 2,056 entries to get past a next run that floods: the engine's work stays bounded", async (t) => {
  const { exit, reads } = await crashThenNextRun(t, 1, 5_000);
  t.like(exit, { exit_code: 4, requested: false });
  const tails = reads.map((line) => Number(/[?&]tail=(\d+)/.exec(line)?.[1]));
  t.log(`tails asked for: ${tails.join(', ')}`);
  t.true(tails.length > 0 && tails.every((tail) => tail <= 2_056), `tails asked for: ${tails.join(', ')}`);
});

/** The idle bot, saying when its trap is set: a shell as PID 1 ignores SIGTERM until then, and the engine's SIGKILL ends it. */
const TRAPPED_BOT = "trap 'echo saved state; exit 0' TERM; echo trap set; while :; do sleep 1 & wait $!; done";

/** Whether the bot's `runs`th run has set its trap (a started event can come before the shell has run its first line). */
const trapSet = (bot: TestBot, runs: number): Promise<boolean> =>
  eventually(async () => ((await bot.container.logs({ stdout: true, stderr: true })).toString().match(/trap set/g)?.length ?? 0) >= runs, 10_000, 50);

test('stopped and restarted through the agent: requested records with the lines it wrote on SIGTERM; events say so', async (t) => {
  const bot = await fixture.runBot({ start: false, script: TRAPPED_BOT });
  const events = await openStream(agent.server, `/api/bots/${bot.id}/events`);
  t.is(events.status, 200);
  t.regex(String(events.headers['content-type']), /^text\/event-stream/);
  await bot.container.start();
  await events.next((e) => e.event === 'started');
  t.true(await trapSet(bot, 1), 'the bot set its trap');

  t.is((await call(agent.server, '/api/bots/restart', { body: { bot_id: bot.id, user_id: 'user_1' } })).status, 200);
  const [restarted] = await awaitExits(bot, 1);
  t.like(restarted, { exit_code: 0, signal: null, requested: true, oom_killed: false });
  t.regex(restarted!.logs, /saved state/);
  const running = await statusOf(bot);
  t.like(running, { state: 'running', crashes_last_hour: 0 });
  t.regex(String(running.uptime), /^0h 0m$/);
  t.is(running.started_at, new Date((await bot.container.inspect()).State.StartedAt).toISOString());

  t.true(await trapSet(bot, 2), 'its next run set its trap');
  t.is((await call(agent.server, '/api/bots/stop', { body: { bot_id: bot.id, user_id: 'user_1' } })).status, 200);
  const [stopped] = await awaitExits(bot, 2);
  t.like(stopped, { exit_code: 0, requested: true });
  t.is((await statusOf(bot)).state, 'stopped');

  await events.next((e) => e.event === 'operation' && e.data.operation === 'stop');
  await events.next((e) => e.event === 'exited' && e.data.exit !== undefined && events.events.filter((x) => x.event === 'exited').length === 2);
  const kinds = events.events.map((e) => (e.event === 'operation' ? `operation ${String(e.data.operation)} ${String(e.data.result)}` : e.event));
  // The operation's answer and the engine's events run apart: only each one's own order is fixed.
  t.deepEqual(kinds.filter((kind) => !kind.startsWith('operation')), ['started', 'exited', 'started', 'exited']);
  t.deepEqual(kinds.filter((kind) => kind.startsWith('operation')), ['operation restart ok', 'operation stop ok']);
  const exited = events.events.find((e) => e.event === 'exited')!;
  t.like(exited.data, { type: 'exited', bot_id: bot.id, id: exited.id });
  const { logs: _logs, ...withoutLogs } = restarted!;
  t.deepEqual(exited.data.exit, withoutLogs, 'an exited event is the record without its logs');
  t.like(events.events.find((e) => e.event === 'operation')!.data, { by: 'platform' });
  const ids = events.events.map((e) => Number(e.id));
  t.deepEqual([...ids].sort((a, b) => a - b), ids, 'cursors increase');
  events.close();
});

test('records outlive the container: removed and created again with the same bot id, the old runs are still there', async (t) => {
  const bot = await fixture.runBot({ script: 'echo first life; exit 4' });
  await awaitExits(bot, 1);
  await bot.container.remove({ force: true });
  const again = await fixture.runBot({ id: bot.id, script: 'echo second life; exit 5' });
  const exits = await awaitExits(again, 2);
  t.like(exits[0], { exit_code: 5 });
  t.regex(exits[0]!.logs, /second life/);
  t.notRegex(exits[0]!.logs, /first life/);
  t.like(exits[1], { exit_code: 4 });
  t.regex(exits[1]!.logs, /first life/);
  t.is((await exitsOf(again, 1)).length, 1, 'limit');
  t.like(await call(agent.server, `/api/bots/${bot.id}/exits?limit=51`), { status: 400 });
  t.like(await call(agent.server, `/api/bots/${bot.id}/exits?limit=0`), { status: 400 });
});

test('crash loop under a restart policy: crash-looping with an event, each run its own record; recovers once it runs', async (t) => {
  // Crashes on its first three runs (the container's file system keeps the count), then runs.
  const script = 'n=$(cat /tmp/runs 2>/dev/null || echo 0); n=$((n+1)); echo $n > /tmp/runs; echo "run $n"; [ $n -le 3 ] && exit 1; exec sleep 1000';
  const bot = await fixture.runBot({ script, restartPolicy: 'on-failure', start: false });
  const events = await openStream(agent.server, `/api/bots/${bot.id}/events`);
  await bot.container.start();
  const looping = await events.next((e) => e.event === 'crash-looping');
  t.like(looping.data, { crashes: 3, window_s: 600, bot_id: bot.id });
  // Read at once: the loop ends RECOVER_AFTER_MS into the run that follows, which a busy host reached before the records below were read.
  t.like(await statusOf(bot), { state: 'crash-looping', crashes_last_hour: 3 });
  const exits = await awaitExits(bot, 3);
  t.deepEqual(
    exits.map((exit) => [exit.exit_code, exit.requested, exit.logs.trim()]),
    [
      [1, false, 'run 3'],
      [1, false, 'run 2'],
      [1, false, 'run 1'],
    ],
  );
  await started(bot);
  await events.next((e) => e.event === 'recovered', RECOVER_AFTER_MS + 10_000);
  t.like(await statusOf(bot), { state: 'running', crashes_last_hour: 3 });
  const kinds = events.events.map((e) => e.event);
  t.deepEqual(kinds, ['started', 'exited', 'started', 'exited', 'started', 'exited', 'crash-looping', 'started', 'recovered']);
  events.close();
});

test('a stop through the agent ends a crash loop', async (t) => {
  const bot = await fixture.runBot({ script: 'echo crash; exit 2', restartPolicy: 'unless-stopped', start: false });
  const events = await openStream(agent.server, `/api/bots/${bot.id}/events`);
  await bot.container.start();
  await events.next((e) => e.event === 'crash-looping');
  t.is((await call(agent.server, '/api/bots/stop', { body: { bot_id: bot.id, user_id: 'user_1' } })).status, 200);
  await events.next((e) => e.event === 'recovered');
  t.not((await statusOf(bot)).state, 'crash-looping');
  events.close();
});

test('crash loop with no restart policy: started again through the agent each time it dies, it is crash-looping too', async (t) => {
  const bot = await fixture.runBot({ script: 'echo "crash"; sleep 0.3; exit 4', start: false });
  const events = await openStream(agent.server, `/api/bots/${bot.id}/events`);
  await bot.container.start();
  for (let run = 1; run <= 3; run++) {
    await awaitExits(bot, run);
    if (run < 3) t.is((await call(agent.server, '/api/bots/start', { body: { bot_id: bot.id, user_id: 'user_1' } })).status, 200);
  }
  const looping = await events.next((e) => e.event === 'crash-looping');
  t.like(looping.data, { crashes: 3, window_s: 600 });
  t.like(await statusOf(bot), { state: 'crash-looping', started_at: null, crashes_last_hour: 3 });
  t.deepEqual((await exitsOf(bot)).map((exit) => [exit.exit_code, exit.requested]), [[4, false], [4, false], [4, false]]);
  events.close();
});

test('GET /api/bots/{id}: 404 for no such bot, 400 for a bad id', async (t) => {
  t.like(await call(agent.server, `/api/bots/${fixture.newBotId()}`), { status: 404, body: { ok: false } });
  t.like(await call(agent.server, `/api/bots/${fixture.newBotId()}/exits`), { status: 404 });
  t.like(await call(agent.server, '/api/bots/not-a-bot'), { status: 400 });
});

test('live logs follow a bot across its restart: its lines with their stream, the exited event, then the next run', async (t) => {
  const script = 'echo "run starts"; echo "to stderr" >&2; trap "echo bye; exit 0" TERM; i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 0.2 & wait $!; done';
  const bot = await fixture.runBot({ script });
  await eventually(async () => (await fixture.docker.getContainer(bot.id).logs({ stdout: true })).toString().includes('tick 2'));
  const follower = await openStream(agent.server, `/api/bots/${bot.id}/logs?follow=true&lines=1000`);
  t.is(follower.status, 200);
  await follower.next((e) => e.data.line === 'run starts');
  t.like((await follower.next((e) => e.data.line === 'to stderr')).data, { stream: 'stderr' });
  const tick = await follower.next((e) => e.data.line === 'tick 5');
  t.like(tick.data, { stream: 'stdout' });
  t.true(Math.abs(Date.parse(String(tick.data.at)) - Date.now()) < 10_000);
  t.is((await call(agent.server, '/api/bots/restart', { body: { bot_id: bot.id, user_id: 'user_1' } })).status, 200);
  const exited = await follower.next((e) => e.event === 'exited');
  t.like(exited.data, { bot_id: bot.id, exit: { requested: true, exit_code: 0 } });
  const afterExit = follower.events.indexOf(exited);
  await follower.next((e) => e.data.line === 'run starts' && follower.events.indexOf(e) > afterExit);
  await follower.next((e) => e.data.line === 'tick 1' && follower.events.indexOf(e) > afterExit);
  const lines = follower.events.map((e) => (e.event === 'log' ? String(e.data.line) : `[${e.event}]`));
  t.is(lines.filter((line) => line === 'run starts').length, 2, 'each run once');
  t.true(lines.indexOf('bye') < afterExit, "the old run's last line comes before its end");
  follower.close();
});

test('live logs of a stopped bot: its last lines, then the next run once it is started', async (t) => {
  const bot = await fixture.runBot({ script: 'echo "hello from $$"; exec sleep 1000' });
  await eventually(async () => (await fixture.docker.getContainer(bot.id).logs({ stdout: true })).toString().includes('hello'));
  await bot.container.stop({ t: 0 });
  const follower = await openStream(agent.server, `/api/bots/${bot.id}/logs?follow=true`);
  await follower.next((e) => String(e.data.line).startsWith('hello'));
  await bot.container.start();
  await follower.next((e) => e.event === 'log' && follower.events.filter((x) => String(x.data.line).startsWith('hello')).length === 2);
  t.pass();
  follower.close();
});

test('from inside a real bot: its own event stream opens; another bot\'s events and live logs, and every bot\'s events, are 403', async (t) => {
  const [self, other] = await Promise.all([fixture.runBot(), fixture.runBot()]);
  for (const path of [`/api/bots/${other.id}/events`, `/api/bots/${other.id}/logs?follow=true`, '/api/events']) {
    const reply = await fixture.httpFromBot(self, target, { method: 'GET', path });
    t.is(reply.status, 403, path);
    t.is(reply.body?.ok, false, path);
  }
  // Its own stream never ends by itself: read it for two seconds.
  const own = await fixture.exec(self, 'printf "%s" "$REQUEST" | timeout 2 nc "$AGENT_HOST" "$AGENT_PORT"', {
    REQUEST: `GET /api/bots/${self.id}/events HTTP/1.1\r\nHost: agent\r\n\r\n`,
    AGENT_HOST: target.host,
    AGENT_PORT: String(target.port),
  });
  t.regex(own, /^HTTP\/1\.1 200/);
  t.regex(own, /content-type: text\/event-stream/i);
});

test('a follower that does not read is cut off once 1 MiB waits for it, while a bot writes fast; another follower keeps streaming', async (t) => {
  const bot = await fixture.runBot({ script: 'l=$(head -c 16000 /dev/zero | tr "\\0" x); i=0; while :; do i=$((i+1)); echo "$i $l"; done' });
  const stalled = connect((agent.server.address() as AddressInfo).port, '127.0.0.1');
  stalled.write(`GET /api/bots/${bot.id}/logs?follow=true&lines=0 HTTP/1.1\r\nHost: localhost\r\n\r\n`);
  stalled.pause();
  const closed = new Promise<boolean>((resolve) => {
    stalled.on('close', () => resolve(true));
    stalled.on('error', () => undefined);
    setTimeout(() => resolve(false), 60_000).unref();
  });
  // Once the agent has dropped the connection, these bytes are refused and the socket closes.
  const poke = setInterval(() => stalled.write('\r\n'), 100);
  const reader = await openStream(agent.server, `/api/bots/${bot.id}/logs?follow=true&lines=0`);
  t.true(await closed, 'the follower that does not read was disconnected');
  clearInterval(poke);
  const seen = reader.events.length;
  await reader.next((_e) => reader.events.length > seen + 100);
  t.true(reader.events.every((e) => e.event === 'log' && /^\d+ x{16000}$/.test(String(e.data.line))), 'whole lines, none cut');
  reader.close();
  await bot.container.remove({ force: true });
});

// Serial (ava runs serial tests before the others): it holds this process's event loop for 3 s, as a loaded
// machine does, which would stall the other tests of the file sharing the agent.
test.serial('live logs keep a run end between the runs when the engine carries the next run in the same stream (a backlog under load)', async (t) => {
  // A burst the agent does not read in time: the engine's follow stream is still behind when the bot restarts,
  // so it goes on with the next run's lines from the same file, before the run's end is recorded.
  const script = 'echo "run starts"; trap "exit 0" TERM; sleep 2; seq 1 10000 | sed "s/^/burst /"; while :; do echo tick; sleep 0.2 & wait $!; done';
  const bot = await fixture.runBot({ script });
  const follower = await openStream(agent.server, `/api/bots/${bot.id}/logs?follow=true&lines=10`);
  await follower.next((e) => e.data.line === 'run starts');
  // The agent's event loop held, as on a loaded machine: the burst waits in the engine, then the restart.
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2_500);
  execFileSync('docker', ['-H', fixture.dockerHost, 'restart', '-t', '1', bot.id]);
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 500);
  const exited = await follower.next((e) => e.event === 'exited', 30_000);
  const afterExit = follower.events.indexOf(exited);
  await follower.next((e) => e.data.line === 'run starts' && follower.events.indexOf(e) > afterExit, 30_000);
  const starts = follower.events.filter((e) => e.data.line === 'run starts').map((e) => follower.events.indexOf(e));
  t.is(starts.length, 2, 'each run once');
  t.true(starts[1]! > afterExit, 'the next run begins after the run end');
  t.is(follower.events[afterExit + 1]?.data.line, 'run starts', "the first line after the run end is the next run's first");
  t.true(follower.events.findIndex((e) => e.data.line === 'burst 10000') < afterExit, "the run's last lines come before its end");
  follower.close();
  // The held loop let the agent's calls to the engine pass their deadlines: the tests after this one start once it answers again.
  t.true(await eventually(async () => (await call(agent.server, `/api/bots/${bot.id}/exits`)).status === 200, 30_000, 200));
});
