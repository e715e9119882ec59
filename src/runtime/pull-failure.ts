import { ImageNotFound, RegistryRefused, RegistryUnreachable } from '../errors.js';
import type { AgentError } from '../errors.js';

/**
 * The words of a failed pull an answer may repeat: what the distribution spec's error codes, HTTP's reason
 * phrases, the engine and the kubelet say of why. Nothing else of a registry's answer is repeated: a registry is
 * anyone's server, and its page (an internal one, behind a registry's name) is not the agent's to show.
 */
const KNOWN_WORDS = [
  'manifest unknown',
  'name unknown',
  'blob unknown',
  'name invalid',
  'tag invalid',
  'unsupported',
  'not found',
  'does not exist',
  'unauthorized',
  'authentication required',
  'no basic auth credentials',
  'incorrect username or password',
  'denied',
  'forbidden',
  'too many requests',
  'toomanyrequests',
  'internal server error',
  'bad gateway',
  'service unavailable',
  'gateway timeout',
  'connection refused',
  'connection reset',
  'no such host',
  'no route to host',
  'network is unreachable',
  'i/o timeout',
  'context deadline exceeded',
  'http response to https client',
  'certificate',
  'unexpected eof',
];

/** What of a failed pull's words may be repeated: its HTTP status, and the known words it holds, in their order. */
export function knownPullWords(detail: string, status: number | undefined): string {
  const words = detail.toLowerCase();
  const found = KNOWN_WORDS.map((word) => ({ word, at: words.indexOf(word) }))
    .filter(({ at }) => at >= 0)
    .sort((a, b) => a.at - b.at)
    .map(({ word }) => word);
  // "HTTP 418 response", "HTTP status: 500", or a reason phrase ("401 Unauthorized").
  const named = /\bHTTP (?:status:? |code )?([1-5]\d\d)\b/.exec(detail) ?? /\b([1-5]\d\d) [A-Z][a-z]+\b/.exec(detail);
  const http = status ?? Number(named?.[1] ?? Number.NaN);
  const said = [...(Number.isNaN(http) ? [] : [`HTTP ${http}`]), ...found];
  return said.length === 0 ? 'no words the agent repeats' : said.join(', ');
}

/** How long a pull may take unless AGENT_PULL_TIMEOUT_S says otherwise (docs/api.md §14). */
export const DEFAULT_PULL_TIMEOUT_MS = 300_000;

/**
 * What a runtime's words for a failed pull mean for the caller (docs/api.md §14): no such image or tag (a
 * 404, a registry's "manifest unknown", containerd's "not found"), credentials refused or wanting, or a
 * registry that cannot be reached or failed. The engine's and the kubelet's words alike.
 */
export function pullFailure(image: string, fullDetail: string, status: number | undefined): AgentError {
  // The registry's (or the kubelet's) words are its input, not ours: only the known words among them are repeated.
  const detail = knownPullWords(fullDetail, status);
  const words = fullDetail.toLowerCase();
  if (/unauthorized|authentication required|no basic auth credentials|incorrect username or password|forbidden|authorization failed|failed to authorize/.test(words)) {
    return new RegistryRefused(`the registry of image ${image} refused the pull's credentials (registry_auth or AGENT_REGISTRY_AUTH): ${detail}`);
  }
  if (status === 404 || /manifest unknown|name unknown|not found|does not exist/.test(words)) {
    return new ImageNotFound(`image ${image} was not found in its registry: ${detail}`);
  }
  if (/denied/.test(words)) {
    return new RegistryRefused(`the registry of image ${image} refused the pull's credentials (registry_auth or AGENT_REGISTRY_AUTH): ${detail}`);
  }
  return new RegistryUnreachable(`the registry of image ${image} could not be reached or failed the pull: ${detail}`);
}
