import { OpenidApi } from '@kubernetes/client-node';
import { compactVerify, createLocalJWKSet, errors } from 'jose';
import type { JSONWebKeySet } from 'jose';
import type { KubeConfig } from '@kubernetes/client-node';
import { withDeadline } from './kube-deadline.js';

/** How long the cluster's keys are used before they are read again... */
const KEYS_FRESH_MS = 5 * 60_000;
/** ...and how soon, at the earliest, a token signed by a key not among them has them read again (a key rotated in). */
const UNKNOWN_KEY_RETRY_MS = 10_000;

/** What the cluster's keys say of a token's signature; `unknown` when they cannot be read (the agent's user may not). */
export type SignatureVerdict = 'valid' | 'invalid' | 'unknown';

/** The JWS algorithms the API server signs ServiceAccount tokens with: any other (`none` above all) signs nothing here. */
const ALGORITHMS = ['RS256', 'ES256', 'ES384', 'ES512'];

type KeySet = ReturnType<typeof createLocalJWKSet>;

/**
 * The cluster's ServiceAccount token signing keys, as its API server publishes them (`/openid/v1/jwks`,
 * readable by every ServiceAccount through the default `system:service-account-issuer-discovery` binding):
 * a token's signature is checked here before anything it claims is believed (docs/api.md §4, rule 8), so a
 * forged token costs the API server nothing and names no one. One read at a time; kept 5 minutes.
 */
export class ClusterTokenKeys {
  private readonly openid: OpenidApi;
  /** The keys read last (jose's key set: a token's key by its `kid` and algorithm), and how many. */
  private keys: KeySet | undefined;
  private keyCount = 0;
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
      if (this.keyCount === 0) await reading;
    }
    if (!this.readable && this.keyCount === 0) return 'unknown';
    const first = await this.check(token);
    // Signed by a key not among those read: a key rotated in since, read again (not more often than every 10 s).
    if (first !== 'no-key' || !this.readable || this.now() - this.readAtMs < UNKNOWN_KEY_RETRY_MS) return first === 'valid' ? 'valid' : 'invalid';
    await this.read();
    return (await this.check(token)) === 'valid' ? 'valid' : 'invalid';
  }

  /** The token's signature against the keys read: `no-key` when none of them is the one it names. */
  private async check(token: string): Promise<'valid' | 'invalid' | 'no-key'> {
    if (this.keys === undefined) return 'no-key';
    try {
      await compactVerify(token, this.keys, { algorithms: ALGORITHMS });
      return 'valid';
    } catch (err) {
      return err instanceof errors.JWKSNoMatchingKey ? 'no-key' : 'invalid';
    }
  }

  private read(): Promise<void> {
    this.reading ??= this.fetch().finally(() => (this.reading = undefined));
    return this.reading;
  }

  private async fetch(): Promise<void> {
    try {
      const set = (await this.openid.getServiceAccountIssuerOpenIDKeyset(withDeadline())) as unknown as Partial<JSONWebKeySet> | string;
      const read = typeof set === 'string' ? (JSON.parse(set) as Partial<JSONWebKeySet>) : set;
      const keys = Array.isArray(read.keys) ? read.keys : [];
      // jose leaves aside a key it cannot use (another type than its algorithm, unknown fields): it verifies nothing.
      this.keys = createLocalJWKSet({ keys });
      this.keyCount = keys.length;
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
