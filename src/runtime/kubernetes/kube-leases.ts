import { CoordinationV1Api, V1MicroTime } from '@kubernetes/client-node';
import type { KubeConfig, V1Lease } from '@kubernetes/client-node';
import { messages, OperationInProgress, RuntimeUnavailable } from '../../errors.js';
import { apiStatus, translateKubeError } from './kube-errors.js';
import { leaseName, legacyLeaseName } from './kube-names.js';
import type { BotLocks, HeldElsewhere, HoldOptions, Inherited } from '../bot-locks.js';

const OPERATION_ANNOTATION = 'bot-agent/operation';

export interface LeaseTimings {
  /** A holder that stops renewing (it died, or cannot reach the API server) loses the lease after this. */
  readonly durationS: number;
  readonly renewMs: number;
  readonly pollMs: number;
  /** The longest any one call to the API server is waited for. */
  readonly callMs: number;
}

const DEFAULT_TIMINGS: LeaseTimings = { durationS: 15, renewMs: 5_000, pollMs: 250, callMs: 5_000 };

/**
 * How long before its lease would expire for the others a holder that could
 * not renew it stops acting, as a share of the lease's duration (3 s of 15):
 * its clock and theirs need not agree on when it renewed, only on how long a
 * second is.
 */
const MARGIN_SHARE = 0.2;

/** A lease this agent holds: as it last wrote it, and when it asked (its own monotonic clock). */
interface Held {
  lease: V1Lease;
  renewedAt: number;
  lost: boolean;
}

/** What the agent last saw of a lease it does not hold: its version, and since when (monotonic) it has not changed. */
interface Seen {
  readonly version: string | undefined;
  readonly since: number;
}

/**
 * A `coordination.k8s.io` Lease per bot in operation, in the bots' namespace:
 * made when an operation begins, renewed while it runs, deleted when it ends.
 * Creating it is the lock (a second create is refused with 409). As client-go's
 * leader election does, a lease held by another is judged expired from when
 * this agent saw its version last change, never by comparing clocks; it is then
 * taken over with a replace that carries the version read, so that of two agents
 * taking it over one wins. The holder renews and deletes it only with the version
 * it last wrote as precondition, and stops acting (503) once it could not renew
 * it for longer than the others would wait. Every call has a deadline.
 */
export class LeaseLocks implements BotLocks {
  private readonly api: CoordinationV1Api;
  private readonly seen = new Map<string, Seen>();

  constructor(
    kubeConfig: KubeConfig,
    private readonly namespace: string,
    /** Who holds a lease: this agent's pod name. */
    private readonly holder: string,
    private readonly timings: LeaseTimings = DEFAULT_TIMINGS,
    /** The clock the lease's stamps are written with (for people reading them: no agent judges by them); tests shift it. */
    private readonly wallClock: () => number = Date.now,
  ) {
    this.api = kubeConfig.makeApiClient(CoordinationV1Api);
  }

  /**
   * Holds the bot's Lease, then the one an agent of the release before took (legacyLeaseName): an agent of
   * that release, still running in a rolling upgrade, and this one never act on one bot at once. The same
   * operation under way through the bot's own Lease is joined; the older Lease is only waited for (ids that
   * differ only in case share it), in that order, so that no two agents ever wait for each other.
   */
  async hold<T>(botId: string, operation: string, work: (inherited?: Inherited) => Promise<T>, options: HoldOptions<T> = {}): Promise<T> {
    const deadline = options.waitMs === undefined ? undefined : this.now() + options.waitMs;
    const legacy = legacyLeaseName(botId);
    // While it waits for the first, it keeps looking at the second: a holder that died left both, and they expire together.
    return this.holdNamed(botId, leaseName(botId), operation, { ...options, watching: legacy }, (inherited) =>
      this.holdNamed(botId, legacy, operation, { waitMs: deadline === undefined ? undefined : Math.max(0, deadline - this.now()) }, (left) =>
        work(inherited ?? left),
      ),
    );
  }

  private async holdNamed<T>(
    botId: string,
    name: string,
    operation: string,
    { joined, waitMs, watching }: HoldOptions<T> & { watching?: string },
    work: (inherited?: Inherited) => Promise<T>,
  ): Promise<T> {
    const deadline = waitMs === undefined ? Infinity : this.now() + waitMs;
    let taken: { held: Held; inherited?: Inherited | undefined };
    for (;;) {
      const other = await this.tryAcquire(botId, name, operation);
      if (!('operation' in other)) {
        taken = other;
        break;
      }
      // The same operation under way elsewhere ends as this one would: its end is this one's, unless its holder died.
      if (joined && other.operation === operation && (await this.waitGone(botId, name, deadline)) === 'ended') return joined();
      if (this.now() >= deadline) throw new OperationInProgress(messages.inProgress(other.operation, botId, waitMs ?? 0));
      if (watching !== undefined) await this.look(botId, watching);
      await sleep(this.timings.pollMs);
    }
    const { held } = taken;
    let renewal: NodeJS.Timeout | undefined;
    let expiry: NodeJS.Timeout | undefined;
    // The renewal under way, which the delete at the end waits for.
    let renewing: Promise<unknown> = Promise.resolve();
    // Lost once it was not renewed for a margin less than the others wait: they never take it while this agent acts.
    const validMs = this.timings.durationS * 1000 * (1 - MARGIN_SHARE);
    const lost = new Promise<never>((_resolve, reject) => {
      const lose = (): void => {
        held.lost = true;
        reject(new RuntimeUnavailable(lostLease(botId)));
      };
      const loseLater = (): void => {
        clearTimeout(expiry);
        expiry = setTimeout(lose, Math.max(0, held.renewedAt + validMs - this.now()));
      };
      loseLater();
      let underWay = false;
      renewal = setInterval(() => {
        // One renewal at a time: a second, sent while a slow first is unanswered, names the version before it and is refused.
        if (underWay) return;
        underWay = true;
        renewing = this.renew(botId, name, held)
          .then((renewed) => (held.lost ? lose() : renewed && loseLater()))
          .finally(() => (underWay = false));
      }, this.timings.renewMs);
    });
    lost.catch(() => undefined);
    try {
      return await Promise.race([work(taken.inherited), lost]);
    } finally {
      clearInterval(renewal);
      clearTimeout(expiry);
      if (!held.lost) {
        // A renewal under way writes a newer version: the delete waits for it (a lost lease waits for nothing).
        await renewing.catch(() => undefined);
        clearTimeout(expiry);
      }
      // Only the version this agent wrote is deleted: a lease another agent took over meanwhile stays.
      if (!held.lost) {
        const resourceVersion = held.lease.metadata?.resourceVersion;
        await this.call(botId, () => this.api.deleteNamespacedLease({ name, namespace: this.namespace, body: { preconditions: { resourceVersion } } })).catch(
          () => undefined,
        );
      }
    }
  }

  private now(): number {
    return performance.now();
  }

  /** Takes the lease (and says what a dead holder left unfinished), or says what its live holder is doing. */
  private async tryAcquire(botId: string, name: string, operation: string): Promise<HeldElsewhere | { held: Held; inherited?: Inherited }> {
    const stamp = new V1MicroTime(this.wallClock());
    const spec = { holderIdentity: this.holder, leaseDurationSeconds: this.timings.durationS, acquireTime: stamp, renewTime: stamp };
    const asked = this.now();
    try {
      const made = await this.call(botId, () =>
        this.api.createNamespacedLease({ namespace: this.namespace, body: { metadata: { name, annotations: { [OPERATION_ANNOTATION]: operation } }, spec } }),
      );
      this.seen.delete(name);
      return { held: { lease: made, renewedAt: asked, lost: false } };
    } catch (err) {
      if (apiStatus(err) !== 409) throw translateKubeError(err, undefined);
    }
    const lease = await this.read(botId, name);
    if (!lease) return this.tryAcquire(botId, name, operation);
    const doing = lease.metadata?.annotations?.[OPERATION_ANNOTATION] ?? 'an operation';
    if (!this.expired(name, lease)) return { operation: doing };
    // Unchanged for as long as its holder said it would renew within: it died mid-operation. Taken over, unless another agent did first.
    try {
      const replaced = await this.call(botId, () =>
        this.api.replaceNamespacedLease({
          name,
          namespace: this.namespace,
          body: { metadata: { name, resourceVersion: lease.metadata?.resourceVersion, annotations: { [OPERATION_ANNOTATION]: operation } }, spec },
        }),
      );
      this.seen.delete(name);
      const begun = lease.spec?.acquireTime;
      const left = lease.metadata?.annotations?.[OPERATION_ANNOTATION];
      return {
        held: { lease: replaced, renewedAt: asked, lost: false },
        inherited: left && begun ? { operation: left, begun: new Date(begun) } : undefined,
      };
    } catch (err) {
      if (apiStatus(err) === 409 || apiStatus(err) === 404) return { operation: doing };
      throw translateKubeError(err, undefined);
    }
  }

  /**
   * Renews the lease with the version this agent last wrote as precondition (a
   * replace of what it wrote); true once renewed. A lease changed or deleted by
   * another is lost at once.
   */
  private async renew(botId: string, name: string, held: Held): Promise<boolean> {
    if (held.lost) return false;
    const asked = this.now();
    const lease: V1Lease = { ...held.lease, spec: { ...held.lease.spec, renewTime: new V1MicroTime(this.wallClock()) } };
    try {
      held.lease = await this.call(botId, () => this.api.replaceNamespacedLease({ name, namespace: this.namespace, body: lease }));
      held.renewedAt = asked;
      return true;
    } catch (err) {
      const status = apiStatus(err);
      if (status === 404 || status === 409) held.lost = true;
      return false;
    }
  }

  /** Whether the lease has not changed, as this agent saw it, for as long as its holder said it would renew within. */
  private expired(name: string, lease: V1Lease): boolean {
    const version = lease.metadata?.resourceVersion;
    const seen = this.seen.get(name);
    if (seen === undefined || seen.version !== version) {
      this.seen.set(name, { version, since: this.now() });
      return false;
    }
    return this.now() - seen.since >= (lease.spec?.leaseDurationSeconds ?? this.timings.durationS) * 1000;
  }

  /** Reads the lease, so that how long it has not changed is known when it is wanted. */
  private async look(botId: string, name: string): Promise<void> {
    const lease = await this.read(botId, name);
    if (lease) this.expired(name, lease);
  }

  /** Resolves once the lease is deleted (its operation ended), has expired (its holder died), or at the deadline. */
  private async waitGone(botId: string, name: string, deadline: number): Promise<'ended' | 'expired' | 'deadline'> {
    for (;;) {
      const lease = await this.read(botId, name);
      if (!lease) return 'ended';
      if (this.expired(name, lease)) return 'expired';
      if (this.now() >= deadline) return 'deadline';
      await sleep(this.timings.pollMs);
    }
  }

  private async read(botId: string, name: string): Promise<V1Lease | undefined> {
    try {
      return await this.call(botId, () => this.api.readNamespacedLease({ name, namespace: this.namespace }));
    } catch (err) {
      if (apiStatus(err) === 404) {
        this.seen.delete(name);
        return undefined;
      }
      throw translateKubeError(err, undefined);
    }
  }

  /** One call to the API server, waited for at most `callMs`: past it, the runtime is unavailable. */
  private async call<T>(botId: string, request: () => Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        request(),
        new Promise<never>((_resolve, reject) => {
          timer = setTimeout(
            () => reject(new RuntimeUnavailable(`${messages.runtimeUnavailable('kubernetes')}: no answer about the Lease of bot ${botId} within ${this.timings.callMs} ms`)),
            this.timings.callMs,
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }
}


function lostLease(botId: string): string {
  return `${messages.runtimeUnavailable('kubernetes')}: this agent could not renew the Lease of bot ${botId} in time, so it stopped acting on the bot; retry`;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
