import { ImageNotFound, RegistryRefused, RegistryUnreachable } from '../errors.js';
import type { AgentError } from '../errors.js';

/** The most of a registry's own words a pull's error repeats. */
const DETAIL_MAX = 1_000;

/** How long a pull may take unless AGENT_PULL_TIMEOUT_S says otherwise (docs/api.md §14). */
export const DEFAULT_PULL_TIMEOUT_MS = 300_000;

/**
 * What a runtime's words for a failed pull mean for the caller (docs/api.md §14): no such image or tag (a
 * 404, a registry's "manifest unknown", containerd's "not found"), credentials refused or wanting, or a
 * registry that cannot be reached or failed. The engine's and the kubelet's words alike.
 */
export function pullFailure(image: string, fullDetail: string, status: number | undefined): AgentError {
  // The registry's (or the kubelet's) words are its input, not ours: an answer carries at most their start.
  const detail = fullDetail.length > DETAIL_MAX ? `${fullDetail.slice(0, DETAIL_MAX)}…` : fullDetail;
  const words = detail.toLowerCase();
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
