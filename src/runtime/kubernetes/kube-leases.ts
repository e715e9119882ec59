import { CoordinationV1Api, V1MicroTime } from '@kubernetes/client-node';
import type { KubeConfig, V1Lease } from '@kubernetes/client-node';
import { apiStatus } from './kube-errors.js';
import type { BotLocks, HeldElsewhere, Inherited } from '../bot-locks.js';

const OPERATION_ANNOTATION = 'bot-agent/operation';

export interface LeaseTimings {
  /** A holder that stops renewing (it died) loses the lease after this. */
  readonly durationS: number;
  readonly renewMs: number;
  readonly pollMs: number;
}

const DEFAULT_TIMINGS: LeaseTimings = { durationS: 15, renewMs: 5_000, pollMs: 250 };

/**
 * A `coordination.k8s.io` Lease per bot in operation, in the bots' namespace:
 * made when an operation begins, renewed while it runs, deleted when it ends.
 * Creating it is the lock (a second create is refused with 409); a lease whose
 * holder stopped renewing it is taken over once it expired, with a replace
 * carrying the version read, so that of two agents taking it over one wins.
 */
export class LeaseLocks implements BotLocks {
  private readonly api: CoordinationV1Api;

  constructor(
    kubeConfig: KubeConfig,
    private readonly namespace: string,
    /** Who holds a lease: this agent's pod name. */
    private readonly holder: string,
    private readonly timings: LeaseTimings = DEFAULT_TIMINGS,
  ) {
    this.api = kubeConfig.makeApiClient(CoordinationV1Api);
  }

  async hold<T>(botId: string, operation: string, work: (inherited?: Inherited) => Promise<T>, joined?: () => T): Promise<T> {
    const name = leaseName(botId);
    let inherited: Inherited | undefined;
    for (;;) {
      const other = await this.tryAcquire(name, operation);
      if (!('operation' in other)) {
        inherited = other.inherited;
        break;
      }
      // The same operation under way elsewhere ends as this one would: its end is this one's, unless its holder died.
      if (joined && other.operation === operation && (await this.waitGone(name)) === 'ended') return joined();
      await sleep(this.timings.pollMs);
    }
    const renewal = setInterval(() => void this.renew(name), this.timings.renewMs);
    try {
      return await work(inherited);
    } finally {
      clearInterval(renewal);
      await this.api.deleteNamespacedLease({ name, namespace: this.namespace }).catch(() => undefined);
    }
  }

  /** Takes the lease (and says what a dead holder left unfinished), or says what its live holder is doing. */
  private async tryAcquire(name: string, operation: string): Promise<HeldElsewhere | { inherited?: Inherited }> {
    const now = new V1MicroTime();
    const spec = { holderIdentity: this.holder, leaseDurationSeconds: this.timings.durationS, acquireTime: now, renewTime: now };
    try {
      await this.api.createNamespacedLease({ namespace: this.namespace, body: { metadata: { name, annotations: { [OPERATION_ANNOTATION]: operation } }, spec } });
      return {};
    } catch (err) {
      if (apiStatus(err) !== 409) throw err;
    }
    const lease = await this.read(name);
    if (!lease) return this.tryAcquire(name, operation);
    if (!expired(lease)) return { operation: lease.metadata?.annotations?.[OPERATION_ANNOTATION] ?? 'an operation' };
    // Its holder died mid-operation: take it over, unless another agent did first.
    try {
      await this.api.replaceNamespacedLease({
        name,
        namespace: this.namespace,
        body: { metadata: { name, resourceVersion: lease.metadata?.resourceVersion, annotations: { [OPERATION_ANNOTATION]: operation } }, spec },
      });
      const left = lease.metadata?.annotations?.[OPERATION_ANNOTATION];
      const begun = lease.spec?.acquireTime;
      return { inherited: left && begun ? { operation: left, begun: new Date(begun) } : undefined };
    } catch (err) {
      if (apiStatus(err) === 409 || apiStatus(err) === 404) return { operation: 'an operation' };
      throw err;
    }
  }

  private async renew(name: string): Promise<void> {
    const lease = await this.read(name).catch(() => undefined);
    if (!lease?.spec || lease.spec.holderIdentity !== this.holder) return;
    lease.spec.renewTime = new V1MicroTime();
    await this.api.replaceNamespacedLease({ name, namespace: this.namespace, body: lease }).catch(() => undefined);
  }

  /** Resolves once the lease is deleted (its operation ended) or has expired (its holder died). */
  private async waitGone(name: string): Promise<'ended' | 'expired'> {
    for (;;) {
      const lease = await this.read(name);
      if (!lease) return 'ended';
      if (expired(lease)) return 'expired';
      await sleep(this.timings.pollMs);
    }
  }

  private async read(name: string): Promise<V1Lease | undefined> {
    try {
      return await this.api.readNamespacedLease({ name, namespace: this.namespace });
    } catch (err) {
      if (apiStatus(err) === 404) return undefined;
      throw err;
    }
  }
}

/** The Lease of a bot in operation: a DNS-1123 name made of its id. */
export function leaseName(botId: string): string {
  return `bot-agent-op-${botId.toLowerCase().replace(/[^a-z0-9-]/g, '-')}`.slice(0, 253);
}

function expired(lease: V1Lease): boolean {
  const renewed = lease.spec?.renewTime ?? lease.spec?.acquireTime;
  if (!renewed) return true;
  return new Date(renewed).getTime() + (lease.spec?.leaseDurationSeconds ?? 0) * 1000 < Date.now();
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
