import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { once } from 'node:events';
import { connect, createServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import test from 'ava';
import { BotAgentClient, BotAgentError, findAgent } from '../../src/client/index.js';
import { agentFor } from '../helpers/agent.js';
import { MemoryDriver } from '../helpers/memory-driver.js';

// The client against local servers only: probes and calls go to loopback.
const BOT = 'bot_1_1_client';

async function closedPort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  return port;
}

/** A port whose listener never accepts and whose backlog is full: a connect there hangs, as to a host that drops it. */
async function hangingPort(t: { teardown(fn: () => void): void }): Promise<number> {
  const listener = spawn('python3', ['-c', [
    'import socket, sys, time',
    's = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(0)',
    'print(s.getsockname()[1], flush=True); time.sleep(60)',
  ].join('\n')]);
  t.teardown(() => listener.kill());
  const [line] = (await once(listener.stdout, 'data')) as [Buffer];
  const port = Number(line.toString().trim());
  const fillers: Socket[] = [];
  for (let i = 0; i < 3; i++) fillers.push(connect(port, '127.0.0.1').on('error', () => undefined));
  t.teardown(() => fillers.forEach((socket) => socket.destroy()));
  await new Promise((resolve) => setTimeout(resolve, 200));
  return port;
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
  const probe = { host: '127.0.0.1', port: await hangingPort(t) };
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
  const client = await BotAgentClient.create({ agentUrl: `http://127.0.0.1:${await closedPort()}`, env: { BOT_ID: BOT } });
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
  const logs = await cli(process.execPath, ['--import=tsx', 'src/client/cli.ts', 'logs', '1'], { env });
  t.is(logs.stdout, 'b\n');
  const gone = await t.throwsAsync(
    cli(process.execPath, ['--import=tsx', 'src/client/cli.ts', 'stats'], { env: { ...env, BOT_ID: 'bot_9_9_gone' } }),
  );
  t.is((gone as { code?: number }).code, 1);
  t.regex(String((gone as { stderr?: string }).stderr), /^bot-agent: 404: container not found/);
});
