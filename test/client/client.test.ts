import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createHttpServer } from 'node:http';
import { connect, createServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import test from 'ava';
import { BotAgentClient, BotAgentError, findAgent } from '../../clients/typescript/src/index.js';
import { BotTokens } from '../../src/identity/bot-tokens.js';
import { agentFor, startAgent } from '../helpers/agent.js';
import { eventually } from '../helpers/eventually.js';
import { MemoryDriver } from '../helpers/memory-driver.js';
import { SocketProxy } from '../helpers/socket-proxy.js';

// The client against local servers only: probes and calls go to loopback.
const BOT = 'bot_1_1_client';

async function closedPort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  return port;
}

/**
 * A port whose listener never accepts and whose backlog is full: a connect there hangs, as to a host that drops it.
 * `close` takes the listener away (the port's connections then fail), so that another server may take the port.
 */
async function hangingPort(t: { teardown(fn: () => void): void }): Promise<{ port: number; close(): void }> {
  const listener = spawn('python3', ['-c', [
    'import socket, sys, time',
    's = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", 0)); s.listen(0)',
    'print(s.getsockname()[1], flush=True); time.sleep(60)',
  ].join('\n')]);
  t.teardown(() => listener.kill('SIGKILL'));
  const [line] = (await once(listener.stdout, 'data')) as [Buffer];
  const port = Number(line.toString().trim());
  const fillers: Socket[] = [];
  for (let i = 0; i < 3; i++) fillers.push(connect(port, '127.0.0.1').on('error', () => undefined));
  t.teardown(() => fillers.forEach((socket) => socket.destroy()));
  await new Promise((resolve) => setTimeout(resolve, 200));
  return {
    port,
    close: () => {
      listener.kill('SIGKILL');
      fillers.forEach((socket) => socket.destroy());
    },
  };
}

/** A run of `botId` that ends by itself with `exitCode`, as a runtime reports it: its log stream ends, then its record comes. */
function crash(driver: MemoryDriver, botId: string, exitCode: number): void {
  driver.endRun(botId);
  const at = new Date();
  driver.observer?.ended({ botId, at, exitCode, oomKilled: false, requested: false, startedAt: new Date(at.getTime() - 1000), logs: 'boom\n', key: `${botId}:${at.getTime()}:${Math.random()}` });
}

/** A client of BOT on an agent over a fresh in-memory driver. */
async function clientFor(t: { teardown(fn: () => Promise<void>): void }): Promise<{ driver: MemoryDriver; client: BotAgentClient; port: number }> {
  const driver = new MemoryDriver();
  driver.add({ id: BOT, ownerId: 'user_5', logLines: ['one', 'two', 'three'] });
  const server = await agentFor(t, driver);
  const { port } = server.address() as AddressInfo;
  return { driver, port, client: await BotAgentClient.create({ agentUrl: `http://127.0.0.1:${port}`, env: { BOT_ID: BOT } }) };
}

/** The command line as a child process, with what it printed so far. */
function cliProcess(t: { teardown(fn: () => void): void }, args: string[], port: number) {
  const child = spawn(process.execPath, ['--import=tsx', 'clients/typescript/src/cli.ts', ...args], {
    env: { ...process.env, BOT_ID: BOT, BOT_AGENT_PROBE: `127.0.0.1:${port}` },
  });
  t.teardown(() => child.kill('SIGKILL'));
  const printed = { stdout: '', stderr: '' };
  child.stdout.on('data', (chunk: Buffer) => (printed.stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (printed.stderr += chunk.toString()));
  const exited = once(child, 'exit') as Promise<[number | null]>;
  return { child, printed, exited };
}

test('the agent is found at the probed address when it answers', async (t) => {
  const server = await agentFor(t, new MemoryDriver());
  const { port } = server.address() as AddressInfo;
  t.is(await findAgent({ probe: { host: '127.0.0.1', port }, env: { PLATFORM_AGENT_URL: 'http://elsewhere' } }), `http://127.0.0.1:${port}`);
});

test('a refused probe falls back to PLATFORM_AGENT_URL, then to the external address', async (t) => {
  const probe = { host: '127.0.0.1', port: await closedPort() };
  t.is(await findAgent({ probe, env: { PLATFORM_AGENT_URL: 'http://agent.internal:8000/' } }), 'http://agent.internal:8000');
  t.is(await findAgent({ probe, env: {}, externalUrl: 'https://agent.example.com' }), 'https://agent.example.com');
  const error = await t.throwsAsync(findAgent({ probe, env: {} }), { instanceOf: BotAgentError });
  t.regex(error.message, /neither PLATFORM_AGENT_URL nor an external address/);
});

test('a probe that hangs gives up after its time-out and falls back', async (t) => {
  const probe = { host: '127.0.0.1', port: (await hangingPort(t)).port };
  const started = Date.now();
  t.is(await findAgent({ probe, env: { PLATFORM_AGENT_URL: 'http://fallback:8000' } }), 'http://fallback:8000');
  t.log(`fell back after ${Date.now() - started} ms`);
});

test('without BOT_ID the client refuses, as the seed asks', async (t) => {
  const error = await t.throwsAsync(BotAgentClient.create({ agentUrl: 'http://127.0.0.1:1', env: {} }), { instanceOf: BotAgentError });
  t.regex(error.message, /BOT_ID is not set/);
});

test('every method works against a running agent', async (t) => {
  const driver = new MemoryDriver();
  const bot = driver.add({ id: BOT, ownerId: 'user_5', logLines: ['one', 'two', 'three'] });
  const server = await agentFor(t, driver, { rateLimit: 100 });
  const { port } = server.address() as AddressInfo;
  const client = await BotAgentClient.create({ probe: { host: '127.0.0.1', port }, env: { BOT_ID: BOT, USER_ID: 'user_5' } });
  t.is(await client.logs(2), 'two\nthree\n');
  t.like(await client.stats(), { cpu_percent: 12.35, memory_usage: '45.21 MB' });
  t.regex(await client.restart(), /restarted/);
  t.regex(await client.stop(), /stopped/);
  t.false(bot.running);
  t.regex(await client.start(), /started/);
  t.regex(await client.selfRestart(), new RegExp(BOT));
  t.is(bot.restarts, 2);
});

test('an agent refusal is one error type carrying msg and status', async (t) => {
  const server = await agentFor(t, new MemoryDriver());
  const { port } = server.address() as AddressInfo;
  const client = await BotAgentClient.create({ agentUrl: `http://127.0.0.1:${port}`, env: { BOT_ID: 'bot_9_9_gone', USER_ID: 'u' } });
  const error = await t.throwsAsync(client.logs(), { instanceOf: BotAgentError });
  t.is(error.status, 404);
  t.regex(error.msg, /container not found/);
});

test('a connection error says what to check', async (t) => {
  const client = await BotAgentClient.create({ agentUrl: `http://127.0.0.1:${await closedPort()}`, env: { BOT_ID: BOT }, timeoutMs: 1_000 });
  const error = await t.throwsAsync(client.stats(), { instanceOf: BotAgentError });
  t.is(error.status, undefined);
  t.regex(error.msg, /agent is running.*address used.*agent's network/);
});

test('the command line prints the answer, and fails with one line', async (t) => {
  const driver = new MemoryDriver();
  driver.add({ id: BOT, logLines: ['a', 'b'] });
  const server = await agentFor(t, driver);
  const { port } = server.address() as AddressInfo;
  // Run apart, not synchronously: the agent answering it lives in this process.
  const cli = promisify(execFile);
  const env = { ...process.env, BOT_ID: BOT, BOT_AGENT_PROBE: `127.0.0.1:${port}` };
  const logs = await cli(process.execPath, ['--import=tsx', 'clients/typescript/src/cli.ts', 'logs', '1'], { env });
  t.is(logs.stdout, 'b\n');
  const gone = await t.throwsAsync(
    cli(process.execPath, ['--import=tsx', 'clients/typescript/src/cli.ts', 'stats'], { env: { ...env, BOT_ID: 'bot_9_9_gone' } }),
  );
  t.is((gone as { code?: number }).code, 1);
  t.regex(String((gone as { stderr?: string }).stderr), /^bot-agent: 404: container not found/);
});

test('status and exits tell why the bot died', async (t) => {
  const { driver, client } = await clientFor(t);
  t.like(await client.status(), { bot_id: BOT, user_id: 'user_5', state: 'running', crashes_last_hour: 0, last_exit: null });
  driver.endRun(BOT);
  crash(driver, BOT, 3);
  crash(driver, BOT, 4);
  const status = await client.status();
  t.like(status, { state: 'exited', crashes_last_hour: 2, last_exit: { exit_code: 4, requested: false, logs: 'boom\n' } });
  t.deepEqual((await client.exits()).map((exit) => exit.exit_code), [4, 3]);
  t.deepEqual((await client.exits(1)).map((exit) => exit.exit_code), [4]);
  const error = await t.throwsAsync(client.exits(51), { instanceOf: BotAgentError });
  t.is(error.status, 400);
});

test('followLogs gives the last lines, new ones, and the end of the run, until aborted', async (t) => {
  const { driver, client } = await clientFor(t);
  const controller = new AbortController();
  const seen: string[] = [];
  const following = (async () => {
    for await (const item of client.followLogs({ lines: 2, signal: controller.signal })) {
      seen.push(item.type === 'log' ? `${item.type}:${String(item.line)}:${String(item.stream)}` : `${item.type}:${String((item.exit as { exit_code: number }).exit_code)}`);
    }
  })();
  t.true(await eventually(() => seen.length === 2));
  driver.write(BOT, 'four');
  t.true(await eventually(() => seen.length === 3));
  crash(driver, BOT, 3);
  t.true(await eventually(() => seen.length === 4));
  controller.abort();
  await following;
  t.deepEqual(seen, ['log:two:stdout', 'log:three:stdout', 'log:four:stdout', 'exited:3']);
});

test('a stream refused before it begins is the one error type with the agent\'s status', async (t) => {
  const server = await agentFor(t, new MemoryDriver());
  const { port } = server.address() as AddressInfo;
  const client = await BotAgentClient.create({ agentUrl: `http://127.0.0.1:${port}`, env: { BOT_ID: 'bot_9_9_gone' } });
  const events = await t.throwsAsync(client.events().next(), { instanceOf: BotAgentError });
  t.is(events.status, 404);
  const logs = await t.throwsAsync(client.followLogs().next(), { instanceOf: BotAgentError });
  t.is(logs.status, 404);
  t.regex(logs.msg, /container not found/);
});

test('events resume after a lost connection: none missed, none twice', async (t) => {
  const { driver, port } = await clientFor(t);
  const proxy = new SocketProxy({ host: '127.0.0.1', port });
  await proxy.start();
  t.teardown(() => proxy.close());
  const client = await BotAgentClient.create({ agentUrl: `http://127.0.0.1:${proxy.port}`, env: { BOT_ID: BOT } });
  crash(driver, BOT, 1);
  const opened = proxy.answered(': stream open');
  const controller = new AbortController();
  const codes: number[] = [];
  const ids: string[] = [];
  const reading = (async () => {
    for await (const event of client.events({ signal: controller.signal })) {
      ids.push(event.id);
      if (event.type === 'exited') codes.push((event.exit as { exit_code: number }).exit_code);
    }
  })();
  // The agent follows new events before it says the stream is open; a fixed wait lost exit 2 on a loaded machine.
  await opened;
  crash(driver, BOT, 2);
  t.true(await eventually(() => codes.length === 1));
  proxy.cut();
  crash(driver, BOT, 3);
  crash(driver, BOT, 4);
  proxy.restore();
  crash(driver, BOT, 5);
  t.true(await eventually(() => codes.length === 4));
  controller.abort();
  await reading;
  // Exit 1 came before the stream opened and without a cursor: not sent.
  t.deepEqual(codes, [2, 3, 4, 5]);
  t.is(new Set(ids).size, ids.length);
});

test('the command line follows logs and events until interrupted', async (t) => {
  const { driver, port } = await clientFor(t);
  const logs = cliProcess(t, ['logs', '1', '--follow'], port);
  t.true(await eventually(() => logs.printed.stdout === 'three\n'), logs.printed.stderr);
  // The event streams go through a proxy, which tells when each is open: a command line can take seconds to start.
  const proxy = new SocketProxy({ host: '127.0.0.1', port });
  await proxy.start();
  t.teardown(() => proxy.close());
  let opened = proxy.answered(': stream open');
  const events = cliProcess(t, ['events'], proxy.port);
  await opened;
  driver.write(BOT, 'four');
  crash(driver, BOT, 3);
  t.true(await eventually(() => logs.printed.stderr.includes('the run ended')), logs.printed.stderr);
  t.is(logs.printed.stdout, 'three\nfour\n');
  t.regex(logs.printed.stderr, /^bot-agent: the run ended at \S+ \(exit code 3\)\n$/);
  t.true(await eventually(() => events.printed.stdout.includes('\n')), events.printed.stderr);
  const [event] = events.printed.stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
  t.like(event, { type: 'exited', bot_id: BOT, exit: { exit_code: 3 } });
  // Resumed after that event, with nothing after it yet: nothing is printed twice.
  opened = proxy.answered(': stream open');
  const resumed = cliProcess(t, ['events', '--after', String(event?.id)], proxy.port);
  await opened;
  await new Promise((resolve) => setTimeout(resolve, 500));
  t.is(resumed.printed.stdout, '');
  for (const cli of [logs, events, resumed]) {
    cli.child.kill('SIGINT');
    t.deepEqual(await cli.exited, [0, null]);
  }
});

test('the command line explains a wrong use', async (t) => {
  const cli = promisify(execFile);
  for (const args of [[], ['reboot'], ['logs', 'many'], ['exits', '--follow'], ['events', '7']]) {
    const error = await t.throwsAsync(cli(process.execPath, ['--import=tsx', 'clients/typescript/src/cli.ts', ...args], { env: { ...process.env, BOT_ID: BOT } }));
    t.is((error as { code?: number }).code, 2, args.join(' '));
    t.regex(String((error as { stderr?: string }).stderr), /^bot-agent: .+\nusage: bot-agent \[--bot <bot_id>\] <command>/);
  }
});

test('with PLATFORM_AGENT_TOKEN the client and its streams present the token: an agent that names bots by token alone knows the bot from it', async (t) => {
  const driver = new MemoryDriver();
  driver.add({ id: BOT, ownerId: 'user_5', logLines: ['one', 'two', 'three'] });
  const botTokens = BotTokens.open(':memory:');
  // From the host itself, which without the token would be the platform: with it, the bot.
  const server = await agentFor(t, driver, { identity: 'token', botTokens });
  const agentUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const client = await BotAgentClient.create({ agentUrl, env: { BOT_ID: BOT, USER_ID: 'user_5', PLATFORM_AGENT_TOKEN: botTokens.sign(BOT) } });
  t.is(await client.logs(2), 'two\nthree\n');
  t.regex(await client.restart(), new RegExp(BOT));
  const other = await BotAgentClient.create({ agentUrl, env: { BOT_ID: 'bot_1_1_other', PLATFORM_AGENT_TOKEN: botTokens.sign(BOT) } });
  const refused = await t.throwsAsync(other.logs(1), { instanceOf: BotAgentError });
  t.is(refused.status, 403);
  const forged = await BotAgentClient.create({ agentUrl, env: { BOT_ID: BOT, PLATFORM_AGENT_TOKEN: `${botTokens.sign(BOT).slice(0, -2)}xx` } });
  t.regex((await t.throwsAsync(forged.logs(1), { instanceOf: BotAgentError })).message, /forged/);
});

test('with PLATFORM_AGENT_TOKEN_FILE the client reads the token from that file at every call, as a kubelet renews it', async (t) => {
  const driver = new MemoryDriver();
  driver.add({ id: BOT, ownerId: 'user_5', logLines: ['one', 'two'] });
  const botTokens = BotTokens.open(':memory:');
  const server = await agentFor(t, driver, { identity: 'token', botTokens });
  const agentUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const folder = mkdtempSync(join(tmpdir(), 'bot-token-'));
  t.teardown(() => rmSync(folder, { recursive: true, force: true }));
  const file = join(folder, 'token');
  writeFileSync(file, `${botTokens.sign(BOT)}\n`);
  const client = await BotAgentClient.create({ agentUrl, env: { BOT_ID: BOT, PLATFORM_AGENT_TOKEN_FILE: file } });
  t.is(await client.logs(1), 'two\n');
  writeFileSync(file, botTokens.sign('bot_1_1_other'));
  t.is((await t.throwsAsync(client.logs(1), { instanceOf: BotAgentError })).status, 403, 'the file was read once only');
  rmSync(file);
  t.regex((await t.throwsAsync(client.logs(1), { instanceOf: BotAgentError })).message, /cannot read the bot's token from .+ \(PLATFORM_AGENT_TOKEN_FILE\)/);
});

/** An HTTP server on 127.0.0.1 (`port`, else a free one) answering every call with an empty log, and the Authorization headers it saw. */
async function standIn(t: { teardown(fn: () => void): void }, port = 0): Promise<{ port: number; authorizations: (string | undefined)[]; connections: () => number }> {
  const authorizations: (string | undefined)[] = [];
  let connections = 0;
  const server = createHttpServer((req, res) => {
    authorizations.push(req.headers.authorization);
    res.setHeader('content-type', 'application/json').end('{"ok":true,"logs":"x\\n"}');
  });
  server.on('connection', () => (connections += 1));
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => server.close());
  return { port: (server.address() as AddressInfo).port, authorizations, connections: () => connections };
}

test("a bot's token goes only to the agent it was configured for: PLATFORM_AGENT_URL (called without probing) or BOT_AGENT_PROBE, never to whatever answers a probe", async (t) => {
  const [stranger, configured] = [await standIn(t), await standIn(t)];
  const probe = { host: '127.0.0.1', port: stranger.port };
  const env = { BOT_ID: BOT, PLATFORM_AGENT_TOKEN: 'bat1.secret' };
  const found = await BotAgentClient.create({ probe, env });
  t.is(await found.logs(1), 'x\n');
  t.deepEqual(stranger.authorizations, [undefined], 'the token went to what answered the probe');
  const told = await BotAgentClient.create({ probe, env: { ...env, PLATFORM_AGENT_URL: `http://127.0.0.1:${configured.port}/` } });
  const strangerConnections = stranger.connections();
  t.is(await told.logs(1), 'x\n');
  t.deepEqual(configured.authorizations, ['Bot bat1.secret']);
  t.is(stranger.connections(), strangerConnections, 'a client with a configured agent still probed');
  const byProbe = await BotAgentClient.create({ env: { ...env, BOT_AGENT_PROBE: `127.0.0.1:${stranger.port}` } });
  t.is(await byProbe.logs(1), 'x\n');
  t.is(stranger.authorizations.at(-1), 'Bot bat1.secret', "the operator's probe address is configuration");
});

// A single agent replaced under the chart's Recreate was away 21 s once (docs/operating.md): a call made as it went
// keeps trying to connect past 15 s (docs/api.md §7: up to 60 s within its deadline).
test('a call made while no agent listens for 16 s still gets its answer', async (t) => {
  const port = await closedPort();
  const client = await BotAgentClient.create({ agentUrl: `http://127.0.0.1:${port}`, env: { BOT_ID: BOT } });
  const began = Date.now();
  const answer = client.logs(1);
  setTimeout(() => void standIn(t, port), 16_000);
  t.is(await answer, 'x\n');
  t.true(Date.now() - began >= 15_900);
});

test('while no agent listens (refused) and while a connection neither opens nor is refused, a call tries again within its deadline and gets its answer', async (t) => {
  // Refused: the agent comes 1.5 s after the call began.
  const refusedPort = await closedPort();
  const refusing = await BotAgentClient.create({ agentUrl: `http://127.0.0.1:${refusedPort}`, env: { BOT_ID: BOT }, timeoutMs: 10_000 });
  const began = Date.now();
  const answer = refusing.logs(1);
  setTimeout(() => void standIn(t, refusedPort), 1_500);
  t.is(await answer, 'x\n');
  t.true(Date.now() - began >= 1_400);
  // Hanging: the port's listener never accepts (a replaced pod's address); then it goes, and an agent takes the port.
  const hanging = await hangingPort(t);
  const waiting = await BotAgentClient.create({ agentUrl: `http://127.0.0.1:${hanging.port}`, env: { BOT_ID: BOT }, timeoutMs: 15_000 });
  const late = waiting.logs(1);
  setTimeout(() => {
    hanging.close();
    setTimeout(() => void standIn(t, hanging.port), 300);
  }, 2_500);
  t.is(await late, 'x\n');
  // A deadline still ends it: nothing ever listens.
  const nobody = await BotAgentClient.create({ agentUrl: `http://127.0.0.1:${await closedPort()}`, env: { BOT_ID: BOT }, timeoutMs: 1_500 });
  const gaveUp = Date.now();
  t.is((await t.throwsAsync(nobody.logs(1), { instanceOf: BotAgentError })).status, undefined);
  t.true(Date.now() - gaveUp < 3_000, `gave up after ${Date.now() - gaveUp} ms`);
});

test('heartbeat() and beatWhile(): beats while the condition holds make the bot healthy by its heartbeats; the platform may not beat', async (t) => {
  const driver = new MemoryDriver();
  driver.add({ id: BOT, ownerId: 'user_5' });
  const botTokens = BotTokens.open(':memory:');
  const started = await startAgent(driver, { identity: 'token', botTokens });
  t.teardown(started.close);
  const agentUrl = `http://127.0.0.1:${(started.server.address() as AddressInfo).port}`;
  const client = await BotAgentClient.create({ agentUrl, env: { BOT_ID: BOT, USER_ID: 'user_5', PLATFORM_AGENT_TOKEN: botTokens.sign(BOT) } });
  t.regex(await client.heartbeat(60), new RegExp(`Heartbeat of bot ${BOT} taken`));
  t.like(started.heartbeats.latest(BOT), { botId: BOT, ttlMs: 60_000 });

  let connected = true;
  const stop = new AbortController();
  const beating = client.beatWhile(() => connected, { everyMs: 50, ttlS: 5, signal: stop.signal });
  t.true(await eventually(() => started.heartbeats.latest(BOT)?.ttlMs === 5_000, 2_000));
  t.like((await client.status()).health, { status: 'healthy', check: 'heartbeat' });
  // The condition no longer holds: no more beats.
  connected = false;
  await new Promise((resolve) => setTimeout(resolve, 120));
  const last = started.heartbeats.latest(BOT)?.atMs;
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.is(started.heartbeats.latest(BOT)?.atMs, last, 'a beat came while the condition did not hold');
  stop.abort();
  await beating;

  // Without the token, from the host itself, the caller is the platform, which has no heartbeat.
  const platform = await BotAgentClient.create({ agentUrl, env: { BOT_ID: BOT } });
  const refused = await t.throwsAsync(platform.heartbeat(), { instanceOf: BotAgentError });
  t.true(refused.status === 403, refused.message);
});
