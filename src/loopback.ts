import { BlockList, isIPv4 } from 'node:net';

const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

/** Whether a plain (not IPv4-mapped) address is a loopback address. */
export function isLoopback(address: string): boolean {
  return loopback.check(address, isIPv4(address) ? 'ipv4' : 'ipv6');
}
