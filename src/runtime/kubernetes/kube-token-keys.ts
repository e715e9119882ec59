import { createPublicKey, verify } from 'node:crypto';
import type { JsonWebKey, KeyObject } from 'node:crypto';
import { OpenidApi } from '@kubernetes/client-node';
import type { KubeConfig } from '@kubernetes/client-node';
import { withDeadline } from './kube-deadline.js';

/** How long the cluster's keys are used before they are read again... */
const KEYS_FRESH_MS = 5 * 60_000;
/** ...and how soon, at the earliest, a token signed by a key not among them has them read again (a key rotated in). */
const UNKNOWN_KEY_RETRY_MS = 10_000;

/** What the cluster's keys say of a token's signature; `unknown` when they cannot be read (the agent's user may not). */
export type SignatureVerdict = 'valid' | 'invalid' | 'unknown';

/** The JWS algorithms the API server signs ServiceAccount tokens with, as node:crypto verifies each. */
const ALGORITHMS: Record<string, { hash: string; ecdsa: boolean }> = {
  RS256: { hash: 'sha256', ecdsa: false },
  ES256: { hash: 'sha256', ecdsa: true },
  ES384: { hash: 'sha384', ecdsa: true },
  ES512: { hash: 'sha512', ecdsa: true },
};

/**
 * The cluster's ServiceAccount token signing keys, as its API server publishes them (`/openid/v1/jwks`,
 * readable by every ServiceAccount through the default `system:service-account-issuer-discovery` binding):
 * a token's signature is checked here before anything it claims is believed (docs/api.md §4, rule 8), so a
 * forged token costs the API server nothing and names no one. One read at a time; kept 5 minutes.
 */
export class ClusterTokenKeys {
  private readonly openid: OpenidApi;
  private keys = new Map<string, KeyObject>();
  private readAtMs = -Infinity;
  private readable = true;
  private reading: Promise<void> | undefined;

  constructor(
    kubeConfig: KubeConfig,
    private readonly report: (what: string, err: unknown) => void = () => undefined,
    private readonly now: () => number = Date.now,
  ) {
    this.openid = kubeConfig.makeApiClient(OpenidApi);
  }

  /** Whether the token (a JWT) carries a signature of one of the cluster's keys. */
  async verdict(token: string): Promise<SignatureVerdict> {
    // Keys that could not be read are asked for again sooner: the API server may have been away a moment.
    if (this.now() - this.readAtMs >= (this.readable ? KEYS_FRESH_MS : UNKNOWN_KEY_RETRY_MS)) {
      const reading = this.read();
      // Only the first read is waited for: later ones happen beside the keys read before.
      if (this.keys.size === 0) await reading;
    }
    if (!this.readable && this.keys.size === 0) return 'unknown';
    const [header, payload, signature] = token.split('.');
    const { alg, kid } = headerOf(header ?? '');
    const algorithm = alg === undefined ? undefined : ALGORITHMS[alg];
    if (algorithm === undefined || signature === undefined) return 'invalid';
    let key = this.keyFor(kid);
    if (key === undefined && this.readable && this.now() - this.readAtMs >= UNKNOWN_KEY_RETRY_MS) {
      await this.read();
      key = this.keyFor(kid);
    }
    if (key === undefined) return 'invalid';
    try {
      const signed = Buffer.from(`${header}.${payload}`);
      const holds = verify(algorithm.hash, signed, algorithm.ecdsa ? { key, dsaEncoding: 'ieee-p1363' } : key, Buffer.from(signature, 'base64url'));
      return holds ? 'valid' : 'invalid';
    } catch {
      // A key of another type than the algorithm named: no signature of the cluster's.
      return 'invalid';
    }
  }

  private keyFor(kid: string | undefined): KeyObject | undefined {
    // A token without a key id (none the API server makes) is checked against the only key, if there is one.
    if (kid === undefined) return this.keys.size === 1 ? [...this.keys.values()][0] : undefined;
    return this.keys.get(kid);
  }

  private read(): Promise<void> {
    this.reading ??= this.fetch().finally(() => (this.reading = undefined));
    return this.reading;
  }

  private async fetch(): Promise<void> {
    try {
      const set = (await this.openid.getServiceAccountIssuerOpenIDKeyset(withDeadline())) as unknown as { keys?: (JsonWebKey & { kid?: string })[] } | string;
      const { keys = [] } = typeof set === 'string' ? (JSON.parse(set) as { keys?: (JsonWebKey & { kid?: string })[] }) : set;
      const read = new Map<string, KeyObject>();
      for (const jwk of keys) {
        try {
          read.set(jwk.kid ?? '', createPublicKey({ key: jwk, format: 'jwk' }));
        } catch {
          // A key node cannot use verifies nothing.
        }
      }
      this.keys = read;
      this.readable = true;
    } catch (err) {
      // Refused (the agent's user may not read them) or away: the keys read before stand; with none, tokens go to the review alone.
      if (this.readable) this.report("the cluster's ServiceAccount keys (/openid/v1/jwks) could not be read: tokens are checked by TokenReview alone", err);
      this.readable = false;
    } finally {
      this.readAtMs = this.now();
    }
  }
}

/** A JWT header's algorithm and key id; nothing of a header that cannot be read. */
function headerOf(part: string): { alg?: string; kid?: string } {
  try {
    const header = JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as unknown;
    if (typeof header !== 'object' || header === null) return {};
    const { alg, kid } = header as Record<string, unknown>;
    return { alg: typeof alg === 'string' ? alg : undefined, kid: typeof kid === 'string' ? kid : undefined };
  } catch {
    return {};
  }
}
