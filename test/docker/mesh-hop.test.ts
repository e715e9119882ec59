import { mkdtempSync } from 'node:fs';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { BotTokens } from '../../src/identity/bot-tokens.js';
import { runAgentProcess } from '../helpers/agent-process.js';

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
