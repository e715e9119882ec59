import { isLoopback } from '../loopback.js';

/** What a request says of where it was sent from, as a browser would have set it. */
export interface RequestOrigin {
  /** The `Host` header; undefined when absent (HTTP/1.0, which no browser sends). */
  readonly host: string | undefined;
  readonly origin: string | undefined;
  readonly fetchSite: string | undefined;
}

/** The host name of a `Host` header or URL authority without its port, in lower case; `[::1]` keeps its brackets. */
function hostName(authority: string): string {
  const lower = authority.trim().toLowerCase();
  if (lower.startsWith('[')) return lower.slice(0, lower.indexOf(']') + 1);
  const colon = lower.indexOf(':');
  return colon < 0 ? lower : lower.slice(0, colon);
}

/** Whether `name` is loopback (`localhost`, 127.0.0.0/8, `[::1]`) or one of `trusted`. */
function namesUs(name: string, trusted: readonly string[]): boolean {
  return name === 'localhost' || name === '[::1]' || isLoopback(name) || trusted.includes(name);
}

function originNamesUs(origin: string, trusted: readonly string[]): boolean {
  // `null` (a sandboxed frame, a file, a redirect across sites) and anything unparsable name no one we trust.
  if (!URL.canParse(origin)) return false;
  const url = new URL(origin);
  return (url.protocol === 'http:' || url.protocol === 'https:') && namesUs(hostName(url.host), trusted);
}

/**
 * Whether a web page in a browser on the agent's host could have sent this
 * request (docs/api.md §4 rule 2): its `Host` names neither loopback nor a
 * trusted name (DNS rebinding), or it carries an `Origin` of another site, or
 * the browser marks it `cross-site` or `same-site`. Such a request from
 * loopback is not the platform.
 */
export function isCrossSite({ host, origin, fetchSite }: RequestOrigin, trusted: readonly string[]): boolean {
  if (host !== undefined && !namesUs(hostName(host), trusted)) return true;
  if (origin !== undefined && !originNamesUs(origin, trusted)) return true;
  return fetchSite === 'cross-site' || fetchSite === 'same-site';
}
