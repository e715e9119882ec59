import type { Identity } from '../config.js';
import { isLoopback } from '../loopback.js';

/**
 * Whether a caller's address is a proxy's hop (docs/api.md §4): an address the operator named
 * (AGENT_PROXY_ADDRESSES), or, where tokens name bots, any loopback address (a mesh's sidecar hands every
 * bot's connections over from 127.0.0.6, or 127.0.0.1). Many bots share a hop's address, so what is
 * bounded per caller there is bounded by what names it (its token's bot or pod), not by the address.
 */
export function hopsOf(identity: Identity, proxies: readonly string[]): (address: string) => boolean {
  const named = new Set(proxies);
  const byToken = identity !== 'address';
  return (address) => named.has(address) || (byToken && isLoopback(address));
}
