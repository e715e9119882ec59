import { isIPv4 } from 'node:net';

/**
 * Whether a plain (not IPv4-mapped) address, as a socket reports it, is a loopback address: 127.0.0.0/8 or ::1.
 * A string test, not net.BlockList: asked on every request, its check built a native address object each time.
 */
export function isLoopback(address: string): boolean {
  return address === '::1' || (address.startsWith('127.') && isIPv4(address));
}

/**
 * Whether a plain address is the host itself calling, as the platform does:
 * exactly 127.0.0.1 or ::1. Any other 127/8 address is a proxy's hop (a
 * service mesh's sidecar hands connections over from 127.0.0.6), which names no one.
 */
export function isHostItself(address: string): boolean {
  return address === '127.0.0.1' || address === '::1';
}
