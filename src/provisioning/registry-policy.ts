import { BlockList, isIP } from 'node:net';
import { Unprocessable } from '../errors.js';
import { registryOf } from './image-reference.js';

/** Addresses that are the host's own or its private networks': a pull from one is the agent's host calling itself. */
const INTERNAL = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.168.0.0', 16],
] as const) {
  INTERNAL.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
] as const) {
  INTERNAL.addSubnet(network, prefix, 'ipv6');
}

/** The host of a registry (`host`, `host:port`, `[v6]:port`), lower case. */
function hostOf(registry: string): string {
  const bracketed = /^\[([^\]]+)\]/.exec(registry);
  if (bracketed) return (bracketed[1] ?? '').toLowerCase();
  return registry.replace(/:\d+$/, '').toLowerCase();
}

/** Whether the registry is named by a loopback, private or link-local address (or `localhost`). */
export function isInternalRegistry(registry: string): boolean {
  const host = hostOf(registry);
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  const family = isIP(host);
  if (family === 4) return INTERNAL.check(host, 'ipv4');
  if (family === 6) {
    // An IPv4 address written as IPv6 (::ffff:127.0.0.1) is that IPv4 address.
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(host)?.[1];
    return mapped === undefined ? INTERNAL.check(host, 'ipv6') : INTERNAL.check(mapped, 'ipv4');
  }
  return false;
}

/**
 * Refuses a pull of `image` its registry may not serve (docs/api.md §14): with AGENT_REGISTRIES, any registry it
 * does not list; without it, a registry named by a loopback, private or link-local address, which would have the
 * engine (as root, on the agent's host) call that address. `before` says what was not done ("is not on the engine, and").
 */
export function checkRegistry(image: string, registries: readonly string[] | undefined, before: string): void {
  const registry = registryOf(image);
  if (registries !== undefined) {
    if (!registries.includes(registry)) throw new Unprocessable(`image ${image} ${before} its registry ${registry} is not one of AGENT_REGISTRIES, so it is not pulled`);
    return;
  }
  if (isInternalRegistry(registry)) {
    throw new Unprocessable(`image ${image} ${before} its registry ${registry} is a loopback, private or link-local address, pulled from only when AGENT_REGISTRIES lists it`);
  }
}
