import { mkdtempSync } from 'node:fs';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { BotTokens } from '../../src/identity/bot-tokens.js';
import { runAgentProcess } from '../helpers/agent-process.js';
import { TcpRelay } from '../helpers/tcp-relay.js';

// Behind a service mesh every bot reaches the agent from the sidecar's hop, 127.0.0.6 (docs/api.md §2): the agent as
// operators run it, under AGENT_IDENTITY=token, bounds connections there by the bot a request names, not by the
// hop's address. Before, the hop had 64 places in all: one bot holding them locked every other bot out.
const HOP = '127.0.0.6';

interface Held {
  readonly socket: Socket;
  /** Each answer's status line as it comes, and whether the agent closed the connection. */
  readonly statuses: number[];
  closed: boolean;
}

function open(port: number): Promise<Held> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1', localAddress: HOP });
    const held: Held = { socket, statuses: [], closed: false };
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      for (const status of chunk.matchAll(/HTTP\/1\.1 (\d{3})/g)) held.statuses.push(Number(status[1]));
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      held.closed = true;
      resolve(held);
    });
    socket.on('connect', () => resolve(held));
  });
}

/** Asks, on a kept-alive connection, for a bot's stats with its token; resolves with the answer's status (0: closed unanswered). */
async function ask(held: Held, botId: string, token: string): Promise<number> {
  const before = held.statuses.length;
  held.socket.write(`GET /api/bots/${botId}/stats HTTP/1.1\r\nHost: agent\r\nAuthorization: Bot ${token}\r\n\r\n`);
  for (let waited = 0; waited < 10_000 && held.statuses.length === before && !held.closed; waited += 20) await new Promise((resolve) => setTimeout(resolve, 20));
  return held.statuses[before] ?? 0;
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 1_000));

test("through a mesh's hop one bot holds at most its 64 connections, never the hop's places: other bots still connect; connections no request named hold at most half", async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'bot-agent-hop-'));
  const agent = await runAgentProcess({ AGENT_DATA_DIR: dataDir, AGENT_IDENTITY: 'token' });
  const sockets: Socket[] = [];
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    agent.process.kill('SIGKILL');
  });
  const tokens = BotTokens.open(dataDir);
  const [greedy, other] = ['bot_1_1_greedy', 'bot_1_1_other'];
  const asking = async (botId: string): Promise<{ held: Held; status: number }> => {
    const held = await open(agent.port);
    sockets.push(held.socket);
    return { held, status: await ask(held, botId, tokens.sign(botId)) };
  };
  // The bots do not exist: each request still names its bot (404 comes after), and that is what counts.
  const greedys = [];
  for (let i = 0; i < 64; i += 1) greedys.push(await asking(greedy));
  t.deepEqual([...new Set(greedys.map((reply) => reply.status))], [404]);
  const past = await asking(greedy);
  t.is(past.status, 429, 'a 65th connection of one bot through the hop');
  await settle();
  t.true(past.held.closed, 'the connection past the bot\'s share stayed open');
  const others = await asking(other);
  t.is(others.status, 404, 'another bot behind the same hop was locked out');
  // Connections that never send a request: at most half the hop's 1,024 places.
  const idle = await Promise.all(Array.from({ length: 520 }, () => open(agent.port)));
  sockets.push(...idle.map((held) => held.socket));
  await settle();
  const idleOpen = idle.filter((held) => !held.closed).length;
  t.is(idleOpen, 512, `${idleOpen} connections that named no one stayed open`);
  t.is(await ask(others.held, other, tokens.sign(other)), 404, 'a bot lost its open connection to the idle ones');
});

test('idle connections through a hop, opened again as fast as the agent closes them, never keep a bot behind the same hop from an answer well within the 10 s an idle one is given', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'bot-agent-hop-'));
  const agent = await runAgentProcess({ AGENT_DATA_DIR: dataDir, AGENT_IDENTITY: 'token' });
  const tokens = BotTokens.open(dataDir);
  const flood = new Set<Socket>();
  let flooding = true;
  // 700 connections that never send a byte, each opened again as soon as it closes.
  const keepOne = (): void => {
    if (!flooding) return;
    const socket = connect({ port: agent.port, host: '127.0.0.1', localAddress: HOP });
    flood.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => {
      flood.delete(socket);
      keepOne();
    });
  };
  t.teardown(() => {
    flooding = false;
    for (const socket of flood) socket.destroy();
    agent.process.kill('SIGKILL');
  });
  for (let i = 0; i < 700; i += 1) keepOne();
  await settle();
  const botId = 'bot_1_1_behindhop';
  const token = tokens.sign(botId);
  for (let round = 0; round < 5; round += 1) {
    const held = await open(agent.port);
    const started = performance.now();
    const status = await ask(held, botId, token);
    const tookMs = performance.now() - started;
    held.socket.destroy();
    // The bot does not exist: 404 is the answer that names it; 0 is a connection reset or closed unanswered.
    t.is(status, 404, `round ${round}: the bot's call got ${status === 0 ? 'no answer' : status}`);
    // Held behind the idle ones, the call would wait out their 10 s to send a request (headersMs); a busy host
    // took 1.1 s to answer one that was not held.
    t.true(tookMs < 5_000, `round ${round}: the answer took ${Math.round(tookMs)} ms`);
  }
  t.true(flood.size >= 500, `the flood held only ${flood.size} connections: it tested nothing`);
});

test('a hop on loopback itself (a sidecar or TCP proxy that connects from 127.0.0.1) is never the platform under token identity, with every other setting at its default', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'bot-agent-hop-'));
  const agent = await runAgentProcess({ AGENT_DATA_DIR: dataDir, AGENT_IDENTITY: 'token' });
  const relay = new TcpRelay({ host: '127.0.0.1', port: agent.port });
  const relayPort = await relay.start();
  t.teardown(async () => {
    await relay.close();
    agent.process.kill('SIGKILL');
  });
  const through = await fetch(`http://127.0.0.1:${relayPort}/api/admin/bots`);
  t.is(through.status, 403, 'a bot behind a proxy on the host was the platform');
  t.like(await through.json(), { ok: false });
  const direct = await fetch(`http://127.0.0.1:${agent.port}/api/admin/bots`);
  t.is(direct.status, 403, 'the host itself, without the admin token');
  await direct.body?.cancel();
  // Saying loopback is the platform as well is refused at start, naming both settings.
  const refused = runAgentProcess({ AGENT_DATA_DIR: dataDir, AGENT_IDENTITY: 'token', AGENT_LOOPBACK_PLATFORM: 'on' }, { captureStderr: true });
  const error = await t.throwsAsync(refused);
  t.regex(error.message, /exited \(1\)[\s\S]*AGENT_LOOPBACK_PLATFORM=on cannot go with AGENT_IDENTITY=token/);
});
