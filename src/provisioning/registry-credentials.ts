import { readFileSync } from 'node:fs';
import { ConfigError } from '../config.js';
import { DOCKER_HUB } from './image-reference.js';

/** A login to an image registry: the platform's, per request or from AGENT_REGISTRY_AUTH (docs/api.md §14). Never logged, never answered back. */
export interface RegistryLogin {
  readonly username: string;
  readonly password: string;
}

/** A Docker config.json key (`https://index.docker.io/v1/`, `registry.example.com`, `https://host:5000`) as a registry host. */
function hostOfKey(key: string): string {
  const host = key.replace(/^[a-z]+:\/\//i, '').replace(/\/.*$/, '').toLowerCase();
  return host === 'index.docker.io' || host === 'registry-1.docker.io' ? DOCKER_HUB : host;
}

/**
 * The logins of a Docker `config.json` (its `auths`, each `auth` the base64 of `user:password`), by registry
 * host. Read once at start: a file that cannot be read or holds no such logins stops the agent, naming it.
 */
export function readRegistryLogins(path: string): ReadonlyMap<string, RegistryLogin> {
  let auths: unknown;
  try {
    auths = (JSON.parse(readFileSync(path, 'utf8')) as { auths?: unknown }).auths;
  } catch (err) {
    throw new ConfigError(`AGENT_REGISTRY_AUTH: cannot read ${path} as a Docker config.json: ${(err as Error).message}`);
  }
  if (typeof auths !== 'object' || auths === null) throw new ConfigError(`AGENT_REGISTRY_AUTH: ${path} has no "auths" object`);
  const logins = new Map<string, RegistryLogin>();
  for (const [key, entry] of Object.entries(auths)) {
    const { auth, username, password } = (entry ?? {}) as { auth?: unknown; username?: unknown; password?: unknown };
    if (typeof username === 'string' && typeof password === 'string') {
      logins.set(hostOfKey(key), { username, password });
      continue;
    }
    const decoded = typeof auth === 'string' ? Buffer.from(auth, 'base64').toString('utf8') : '';
    const colon = decoded.indexOf(':');
    // Entries kept by a credential helper have no auth of their own: there is nothing to send for them.
    if (colon > 0) logins.set(hostOfKey(key), { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) });
  }
  return logins;
}
