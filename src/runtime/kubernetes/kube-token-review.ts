import { createHash } from 'node:crypto';
import { AuthenticationV1Api, CoreV1Api } from '@kubernetes/client-node';
import type { KubeConfig, V1Pod } from '@kubernetes/client-node';
import { LRUCache } from 'lru-cache';
import { RuntimeUnavailable, TooManyRequests } from '../../errors.js';
import { BadBotToken } from '../../identity/bot-tokens.js';
import type { BotTokenVerifier } from '../../identity/bot-tokens.js';
import { BOT_ID_PATTERN, BOT_LABEL } from '../labels.js';
import { translateKubeError } from './kube-errors.js';
import { withDeadline } from './kube-deadline.js';
import { ClusterTokenKeys } from './kube-token-keys.js';

/** The audience a bot's projected ServiceAccount token must be minted for. */
export const TOKEN_AUDIENCE = 'bot-agent';
/** Where provisioned bots find their projected token (PLATFORM_AGENT_TOKEN_FILE). */
export const TOKEN_MOUNT = '/var/run/secrets/bot-agent';
export const TOKEN_PATH = `${TOKEN_MOUNT}/token`;

/** A verdict is used until this long before the token's expiry... */
const BEFORE_EXPIRY_MS = 30_000;
/** ...and never longer than this, so that a deleted or relabelled pod's token stops naming its bot soon after. */
const MAX_VERDICT_MS = 5 * 60_000;
/** A refusal the cluster gave is kept this long: a bot repeating a bad token asks the API server once. */
const REFUSAL_MS = 30_000;
/** TokenReviews in flight at once, and waiting for a place, before a further new token is 429. */
const REVIEWS_AT_ONCE = 8;
const REVIEWS_WAITING = 64;
/** Refusals the cluster gave to one address within REFUSAL_MS before its further new tokens are 429 unasked. */
const REFUSALS_PER_ADDRESS = 10;

type Verdict = { readonly botId: string } | { readonly refusal: string };

/** The refusal of a token none of the cluster's keys signed. */
const NOT_SIGNED = "forbidden: the token is not signed by the cluster's ServiceAccount keys";

/** The claims of a ServiceAccount token the agent reads before asking the cluster (the cluster alone vouches for them). */
interface TokenClaims {
  readonly aud?: string | string[];
  readonly exp?: number;
  readonly sub?: string;
  /** The pod a projected token is bound to, as the token claims it (unverified until the cluster reviews it). */
  readonly 'kubernetes.io'?: { readonly pod?: { readonly name?: string } };
}

/**
 * Names bots by the projected ServiceAccount tokens their pods present (docs/api.md §4, rule 8):
 * the cluster verifies each token through a TokenReview for the audience `bot-agent`, and the token's
 * pod claim must name a pod of the agent's namespace that carries the bot label, as for addresses.
 * A verdict is kept until shortly before the token expires (at most 5 minutes), a refusal 30 s;
 * only the token's digest is kept. An address whose tokens the cluster refused 10 times within 30 s
 * has its further new tokens refused (429) without asking, until that window ends.
 */
export class ServiceAccountTokens implements BotTokenVerifier {
  private readonly authentication: AuthenticationV1Api;
  private readonly core: CoreV1Api;
  private readonly verdicts: LRUCache<string, Verdict>;
  /** Refusals the cluster gave, by the address the tokens came from, within REFUSAL_MS. */
  private readonly refusals: LRUCache<string, number>;
  private readonly reviewing = new Map<string, Promise<Verdict>>();
  private active = 0;
  private readonly waiting: { admit(): void; refuse(err: unknown): void }[] = [];
  private readonly keys: ClusterTokenKeys;

  constructor(
    kubeConfig: KubeConfig,
    private readonly namespace: string,
    private readonly now: () => number = Date.now,
    report: (what: string, err: unknown) => void = () => undefined,
  ) {
    this.keys = new ClusterTokenKeys(kubeConfig, report, now);
    this.authentication = kubeConfig.makeApiClient(AuthenticationV1Api);
    this.core = kubeConfig.makeApiClient(CoreV1Api);
    this.verdicts = new LRUCache({ max: 10_000, ttl: REFUSAL_MS, ttlResolution: 0, perf: { now } });
    this.refusals = new LRUCache({ max: 10_000, ttl: REFUSAL_MS, ttlResolution: 0, perf: { now } });
  }

  /**
   * The bot the token names. A new token's signature is checked against the cluster's keys first: one
   * the cluster did not sign is refused without a review, and counts against no one. Refusals are counted
   * by `address`, or behind a proxy's hop (no address given, many bots share it) by the pod the token
   * claims, a claim its signature vouches for: a bot whose tokens the cluster refuses runs out of its own
   * window, never the others' behind the same hop.
   */
  async botNamed(token: string, address?: string): Promise<string> {
    const claims = readClaims(token);
    const caller = address ?? `pod:${claims['kubernetes.io']?.pod?.name ?? claims.sub ?? ''}`;
    // Refused here without asking the cluster: they only ever refuse, so a forged claim gains nothing.
    if (!audiencesOf(claims).includes(TOKEN_AUDIENCE)) {
      throw new BadBotToken(`forbidden: the token is not for the audience ${TOKEN_AUDIENCE}`);
    }
    const expiresMs = (claims.exp ?? 0) * 1000;
    if (expiresMs <= this.now()) throw new BadBotToken('forbidden: the token has expired');
    const key = createHash('sha256').update(token).digest('base64url');
    let verdict = this.verdicts.get(key);
    if (!verdict) {
      // Where the keys cannot be read (`unknown`), the review alone judges, as before there were keys.
      if ((await this.keys.verdict(token)) === 'invalid') throw new BadBotToken(NOT_SIGNED);
      // A bot sending token after refused token would have the API server review each: past a few, it waits.
      if ((this.refusals.get(caller) ?? 0) >= REFUSALS_PER_ADDRESS) {
        const from = address ?? `tokens claiming ${caller}`;
        throw new TooManyRequests(`too many refused tokens from ${from}: try again in ${REFUSAL_MS / 1000} s`, REFUSAL_MS / 1000);
      }
      let pending = this.reviewing.get(key);
      if (!pending) {
        pending = this.review(token, key, expiresMs).finally(() => this.reviewing.delete(key));
        this.reviewing.set(key, pending);
      }
      verdict = await pending;
      if ('refusal' in verdict) {
        // Counted from the first refusal: the window does not grow while refusals keep coming.
        const remaining = this.refusals.getRemainingTTL(caller);
        this.refusals.set(caller, (this.refusals.get(caller) ?? 0) + 1, remaining > 0 ? { ttl: remaining } : {});
      }
    }
    if ('refusal' in verdict) throw new BadBotToken(verdict.refusal);
    return verdict.botId;
  }

  private async review(token: string, key: string, expiresMs: number): Promise<Verdict> {
    await this.place();
    try {
      const verdict = await this.judge(token);
      const ttl = 'botId' in verdict ? Math.min(expiresMs - BEFORE_EXPIRY_MS - this.now(), MAX_VERDICT_MS) : REFUSAL_MS;
      if (ttl > 0) this.verdicts.set(key, verdict, { ttl });
      return verdict;
    } catch (err) {
      // The API server did not answer: those waiting would each wait for it in turn, a round at a time; they
      // hear the same now.
      if (err instanceof RuntimeUnavailable) for (const waiter of this.waiting.splice(0)) waiter.refuse(err);
      throw err;
    } finally {
      this.active -= 1;
      this.waiting.shift()?.admit();
    }
  }

  /** A place among the reviews in flight; TooManyRequests when too many already wait. */
  private async place(): Promise<void> {
    if (this.active < REVIEWS_AT_ONCE) {
      this.active += 1;
      return;
    }
    if (this.waiting.length >= REVIEWS_WAITING) {
      throw new TooManyRequests('too many new tokens to verify at once: try again in a second', 1);
    }
    await new Promise<void>((admit, refuse) => this.waiting.push({ admit, refuse }));
    this.active += 1;
  }

  /** The cluster's verdict on the token, then the bot its pod claim names. */
  private async judge(token: string): Promise<Verdict> {
    let review;
    try {
      review = await this.authentication.createTokenReview(
        { body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token, audiences: [TOKEN_AUDIENCE] } } },
        withDeadline(),
      );
    } catch (err) {
      throw translateKubeError(err, undefined);
    }
    const status = review.status;
    if (!status?.authenticated) {
      return { refusal: `forbidden: the cluster does not accept the token${status?.error ? ` (${cleanReason(status.error)})` : ''}` };
    }
    if (!(status.audiences ?? []).includes(TOKEN_AUDIENCE)) return { refusal: `forbidden: the token is not for the audience ${TOKEN_AUDIENCE}` };
    const account = /^system:serviceaccount:([^:]+):/.exec(status.user?.username ?? '');
    if (!account) return { refusal: 'forbidden: the token is not a ServiceAccount token' };
    if (account[1] !== this.namespace) return { refusal: `forbidden: the token is of another namespace than the bots' (${this.namespace})` };
    const podName = status.user?.extra?.['authentication.kubernetes.io/pod-name']?.[0];
    const podUid = status.user?.extra?.['authentication.kubernetes.io/pod-uid']?.[0];
    if (!podName) return { refusal: 'forbidden: the token names no pod: mount it with a projected volume (docs/identity.md, "Identity by token")' };
    let pod: V1Pod | undefined;
    try {
      // A list by name, not a get: the agent's Role lists and watches pods, and needs no more.
      const pods = await this.core.listNamespacedPod({ namespace: this.namespace, fieldSelector: `metadata.name=${podName}` }, withDeadline());
      pod = pods.items[0];
    } catch (err) {
      throw translateKubeError(err, undefined);
    }
    if (!pod) return { refusal: 'forbidden: the token names a pod that is gone' };
    if (podUid !== undefined && pod.metadata?.uid !== podUid) return { refusal: 'forbidden: the token names a pod that is gone' };
    const botId = pod.metadata?.labels?.[BOT_LABEL];
    if (botId === undefined || !BOT_ID_PATTERN.test(botId)) return { refusal: 'forbidden: the token names a pod that is no bot' };
    if (pod.metadata?.deletionTimestamp) return { refusal: 'forbidden: the token names a pod that is being deleted' };
    return { botId };
  }
}

/** The token's claims, unverified; BadBotToken when it is no JWT. */
function readClaims(token: string): TokenClaims {
  const parts = token.split('.');
  if (parts.length !== 3 || parts[1] === '') throw new BadBotToken('forbidden: not a ServiceAccount token (a JWT)');
  try {
    const claims = JSON.parse(Buffer.from(parts[1] ?? '', 'base64url').toString('utf8')) as unknown;
    if (typeof claims === 'object' && claims !== null && !Array.isArray(claims)) return claims as TokenClaims;
  } catch {
    // Said below.
  }
  throw new BadBotToken('forbidden: not a ServiceAccount token (a JWT)');
}

function audiencesOf(claims: TokenClaims): string[] {
  const { aud } = claims;
  if (typeof aud === 'string') return [aud];
  return Array.isArray(aud) ? aud.filter((value): value is string => typeof value === 'string') : [];
}

/** The API server's reason, short and on one line. */
function cleanReason(reason: string): string {
  return reason.replace(/\s+/g, ' ').slice(0, 200);
}
