import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import test from 'ava';
import { runAgentProcess } from '../helpers/agent-process.js';
import { eventually } from '../helpers/eventually.js';
import { openStream } from '../helpers/sse-client.js';
import type { EventStream } from '../helpers/sse-client.js';

// One address holding thousands of idle or half-sent connections, as a bot could (docs/api.md §2): the agent
// as operators run it keeps 64 of them, closes half-sent requests within seconds, stays small and answers others.
// One test at a time: 10,000 sockets in this process would hold up the other tests' own clients.
const HOLDERS = 10_000;

/** An address of this host other than loopback (a bridge's): a caller the agent counts per address, as a bot. */
function hostAddress(): string {
  const address = Object.values(networkInterfaces())
    .flat()
    .find((candidate) => candidate?.family === 'IPv4' && !candidate.internal)?.address;
  if (!address) throw new Error('this host has no address besides loopback (npm test starts the Docker engine, whose bridge has one)');
  return address;
}

/** Opens `count` connections from `from`; resolves with those still open a second after the last was made. */
async function hold(port: number, host: string, count: number): Promise<{ sockets: Socket[]; open: () => number }> {
  const sockets: Socket[] = [];
  let closed = 0;
  await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<void>((resolve) => {
          const socket = connect({ port, host, localAddress: host }, () => resolve());
          socket.on('error', () => resolve());
          socket.on('close', () => {
            closed += 1;
            resolve();
          });
          sockets.push(socket);
        }),
    ),
  );
  return { sockets, open: () => count - closed };
}

function rssMiB(pid: number): number {
  return Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024;
}

/** How many sockets the process holds open, from its file descriptors. */
function socketsOf(pid: number): number {
  let count = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:')) count += 1;
    } catch {
      // Closed meanwhile.
    }
  }
  return count;
}

test.serial('one address holding 10,000 idle connections: the agent keeps at most 64 of them, stays under 256 MiB and answers others', async (t) => {
  const host = hostAddress();
  const agent = await runAgentProcess({ AGENT_HOST: '0.0.0.0', AGENT_DATA_DIR: ':memory:', DOCKER_HOST: 'unix:///nonexistent.sock' });
  t.teardown(() => agent.process.kill('SIGKILL'));
  const pid = agent.process.pid!;
  const before = socketsOf(pid);
  // The agent's own count of what it holds, sampled while the 10,000 arrive and after: the kernel may accept
  // more for an instant, the agent closes each past the 64th as it takes it up.
  let most = 0;
  let holding = true;
  const sampling = (async () => {
    while (holding) {
      most = Math.max(most, socketsOf(pid) - before);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  const held = await hold(agent.port, host, HOLDERS);
  t.teardown(() => held.sockets.forEach((socket) => socket.destroy()));
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  holding = false;
  await sampling;
  t.log(`at most ${most} sockets of the agent's own besides its listening ones`);
  t.true(most <= 64 + 8, `the agent held ${most} connections from one address`);
  const began = performance.now();
  const reply = await fetch(`http://127.0.0.1:${agent.port}/healthz`);
  t.is(reply.status, 200);
  t.log(`another caller answered in ${Math.round(performance.now() - began)} ms; the agent's peak RSS ${Math.round(rssMiB(pid))} MiB`);
  t.true(rssMiB(pid) < 256);
  // The same address is answered again once it lets connections go.
  held.sockets.forEach((socket) => socket.destroy());
  await new Promise((resolve) => setTimeout(resolve, 500));
  const again = await fetch(`http://${host}:${agent.port}/healthz`);
  t.is(again.status, 200);
});

test.serial('a request whose headers never end is closed within the 10 s the agent gives them, not held for minutes', async (t) => {
  const host = hostAddress();
  const agent = await runAgentProcess({ AGENT_HOST: '0.0.0.0', AGENT_DATA_DIR: ':memory:', DOCKER_HOST: 'unix:///nonexistent.sock' });
  t.teardown(() => agent.process.kill('SIGKILL'));
  const socket = connect({ port: agent.port, host, localAddress: host });
  t.teardown(() => socket.destroy());
  const began = Date.now();
  socket.write('GET /healthz HTTP/1.1\r\nHost: agent\r\n');
  const trickle = setInterval(() => socket.write('X-Slow: a\r\n'), 1_000);
  t.teardown(() => clearInterval(trickle));
  let answer = '';
  socket.on('data', (chunk: Buffer) => (answer += chunk.toString('utf8')));
  await new Promise((resolve) => socket.once('close', resolve));
  const heldMs = Date.now() - began;
  t.log(`closed after ${heldMs} ms: ${answer.split('\r\n')[0]}`);
  t.true(heldMs < 12_000, `held ${heldMs} ms`);
  t.regex(answer, /^HTTP\/1.1 408/);
});

test.serial("the platform's connections do not count against its address: 100 event streams with its token from one address stay open", async (t) => {
  const host = hostAddress();
  const token = 'platform-token-0123456789abcdef0123456789';
  // The real engine: a caller from a bridge's address is asked of it first (is it a bot?), then taken for the platform by its token.
  const agent = await runAgentProcess({ AGENT_HOST: '0.0.0.0', AGENT_DATA_DIR: ':memory:', AGENT_ADMIN_TOKEN: token });
  t.teardown(() => agent.process.kill('SIGKILL'));
  const streams: EventStream[] = [];
  for (let i = 0; i < 100; i += 1) {
    streams.push(await openStream({ host, port: agent.port }, '/api/events', { from: host, headers: { authorization: `Bearer ${token}` } }));
  }
  t.teardown(() => streams.forEach((stream) => stream.close()));
  t.deepEqual(new Set(streams.map((stream) => stream.status)), new Set([200]));
  // The address still has its 64 for callers without the token.
  const held = await hold(agent.port, host, 70);
  t.teardown(() => held.sockets.forEach((socket) => socket.destroy()));
  await eventually(() => held.open() === 64, 15_000, 100);
  t.is(held.open(), 64);
});
