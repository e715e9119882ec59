import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';

/** A loopback port free now: for a server that must say its address before it listens (a fleet's agents). */
export async function freePort(): Promise<number> {
  const probe = createServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => probe.once('listening', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}
