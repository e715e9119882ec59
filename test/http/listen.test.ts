import test from 'ava';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { startAgent } from '../helpers/agent.js';
import { MemoryDriver } from '../helpers/memory-driver.js';

// The kernel holds at most net.core.somaxconn connections waiting, whatever the agent asks for.
const SOMAXCONN = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8'));
const CALLERS = Math.min(1_000, SOMAXCONN);
/** Linux sends a dropped SYN again after a second: a connection still waiting this long has lost one. */
const BEFORE_A_RETRY_MS = 900;

test('a thousand callers connecting at once are all let in at once, none dropped to wait for a retry', async (t) => {
  // A host that caps the queue below 1,000 is tried with fewer; below 512 (Node's own 511 and one) the test
  // could not tell the agent's backlog from Node's, so the log says so rather than hide it.
  if (CALLERS < 1_000) t.log(`net.core.somaxconn is ${SOMAXCONN}: only ${CALLERS} callers can wait at once here`);
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
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([all, new Promise((resolve) => (timer = setTimeout(resolve, BEFORE_A_RETRY_MS)))]);
  clearTimeout(timer);
  t.is(connected, CALLERS);
});
