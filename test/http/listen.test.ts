import test from 'ava';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { startAgent } from '../helpers/agent.js';
import { MemoryDriver } from '../helpers/memory-driver.js';

const CALLERS = 1_000;
/** Linux sends a dropped SYN again after a second: a connection still waiting this long has lost one. */
const BEFORE_A_RETRY_MS = 900;

test('a thousand callers connecting at once are all let in at once, none dropped to wait for a retry', async (t) => {
  const agent = await startAgent(new MemoryDriver());
  t.teardown(agent.close);
  const { port } = agent.server.address() as AddressInfo;
  const sockets: Socket[] = [];
  t.teardown(() => sockets.forEach((socket) => socket.destroy()));
  // Every connect is made before the agent's loop turns again to accept: all wait in the kernel's queue at once.
  let connected = 0;
  const all = new Promise<void>((resolve) => {
    for (let i = 0; i < CALLERS; i++) {
      const socket = connect(port, '127.0.0.1', () => ++connected === CALLERS && resolve());
      socket.on('error', () => undefined);
      sockets.push(socket);
    }
  });
  await Promise.race([all, new Promise((resolve) => setTimeout(resolve, BEFORE_A_RETRY_MS))]);
  t.is(connected, CALLERS);
});
