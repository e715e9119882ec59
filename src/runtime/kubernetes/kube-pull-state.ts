import type { CoreV1Api, CoreV1Event, V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import { withDeadline } from './kube-deadline.js';

/** The kubelet's waiting reasons for an image it cannot pull. */
export const PULL_FAILURES = new Set(['ErrImagePull', 'ImagePullBackOff', 'ImageInspectError', 'InvalidImageName', 'ErrImageNeverPull', 'RegistryUnavailable']);

/** Waiting reasons that come before or during the pull; any other comes after it (the kubelet pulls first). */
const BEFORE_THE_PULL = new Set(['', 'ContainerCreating', 'PodInitializing']);

/**
 * Where a bot's pods stand with their image (docs/api.md §14):
 * - `pulled`: a container has the image (it names an image ID, ran, or waits for something past the pull,
 *   as a missing Secret or a crash loop);
 * - `failed`: the kubelet cannot pull it (`waiting` holds its reason and words);
 * - `unschedulable`: no pod is on a node and the scheduler says there is no room (it waits for room, not a pull);
 * - `pulling`: anything else, for now.
 */
export type PullState =
  | { readonly kind: 'pulled' | 'unschedulable' | 'pulling' }
  | { readonly kind: 'failed'; readonly reason: string; readonly message: string | undefined };

export function pullState(pods: readonly V1Pod[]): PullState {
  const statuses = pods.flatMap((pod) => pod.status?.containerStatuses ?? []);
  if (statuses.some(hasImage)) return { kind: 'pulled' };
  const waiting = statuses.map((status) => status.state?.waiting).find((state) => PULL_FAILURES.has(state?.reason ?? ''));
  if (waiting) return { kind: 'failed', reason: waiting.reason ?? '', message: waiting.message };
  if (pods.length > 0 && pods.every(unschedulable)) return { kind: 'unschedulable' };
  return { kind: 'pulling' };
}

function hasImage(status: V1ContainerStatus): boolean {
  if ((status.imageID ?? '') !== '' || status.state?.running || status.state?.terminated || status.lastState?.terminated) return true;
  const reason = status.state?.waiting?.reason;
  return reason !== undefined && !BEFORE_THE_PULL.has(reason) && !PULL_FAILURES.has(reason);
}

function unschedulable(pod: V1Pod): boolean {
  if (pod.spec?.nodeName) return false;
  return (pod.status?.conditions ?? []).some((condition) => condition.type === 'PodScheduled' && condition.status === 'False' && condition.reason === 'Unschedulable');
}

/**
 * What the kubelet's events of a pull wait's pods say of the last refused pull:
 * - `lacked`: it was the kubelet's own miss, not the registry's verdict: just before it the kubelet said it could not
 *   read Secrets the agent made itself (`own`: its Secret cache lags a Secret made just before the pod, under load)
 *   and pulled without them. Its next pull, after its back-off (10 s at least), has them. A Secret it could not read
 *   that the operator named (AGENT_IMAGE_PULL_SECRETS) is not waited for.
 * - `refused`: the refusal's event is posted with no such miss before it;
 * - `unposted`: neither is posted yet (a busy kubelet posts its events seconds after the pod's status).
 */
export function pullRefusalOf(events: readonly CoreV1Event[], own: (secret: string) => boolean): 'lacked' | 'refused' | 'unposted' {
  // A miss that names no Secret is the kubelet's cache timing out ("failed to sync secret cache", seen on a busy
  // rehearsal): its own, as one of the agent's Secrets is.
  const lacked = latestMs(events, (event) => event.reason === 'FailedToRetrieveImagePullSecret' && secretsNamed(event.message).every((name) => name === '' || own(name)));
  const refused = latestMs(events, isRefusedPull);
  // Events are stamped in whole seconds, and the miss comes a moment before its pull's refusal (the next second,
  // often): a miss up to 5 s before the refusal was that pull's; an earlier pull was 10 s or more before.
  if (lacked > -Infinity && lacked >= refused - LACK_BEFORE_REFUSAL_MS) return 'lacked';
  return refused > -Infinity ? 'refused' : 'unposted';
}

/** The kubelet's own words for the last pull it could not make (its `Failed to pull image` event); undefined if none is posted. */
export function pullWordsOf(events: readonly CoreV1Event[]): string | undefined {
  const latest = latestMs(events, isRefusedPull);
  return events.find((event) => isRefusedPull(event) && stampMs(event) === latest)?.message;
}

/** How many pulls the kubelet's posted events say it was refused (a repeated event counts each time it was posted). */
export function refusedPullsOf(events: readonly CoreV1Event[]): number {
  return events.filter(isRefusedPull).reduce((sum, event) => sum + Math.max(1, event.count ?? 1, event.series?.count ?? 0), 0);
}

function isRefusedPull(event: CoreV1Event): boolean {
  return event.reason === 'Failed' && (event.message ?? '').startsWith('Failed to pull image');
}

function stampMs(event: CoreV1Event): number {
  return new Date(event.lastTimestamp ?? event.eventTime ?? event.firstTimestamp ?? 0).getTime();
}

function latestMs(events: readonly CoreV1Event[], matching: (event: CoreV1Event) => boolean): number {
  return Math.max(-Infinity, ...events.filter(matching).map(stampMs));
}

/**
 * The events of the pods named: a list per pod, its name in the field selector, never every Pod event of the
 * namespace (at 5,000 bots some 15,000, each encoded, sent and parsed at every poll; the API server leaves out
 * the others before it encodes the answer).
 */
export async function podEventsOf(core: CoreV1Api, namespace: string, podNames: Iterable<string>): Promise<CoreV1Event[]> {
  const selector = (name: string) => `involvedObject.kind=Pod,involvedObject.name=${name}`;
  const lists = await Promise.all([...new Set(podNames)].map((name) => core.listNamespacedEvent({ namespace, fieldSelector: selector(name) }, withDeadline())));
  return lists.flatMap((list) => list.items);
}

/** The names of `pods`. */
export function namesOf(pods: readonly V1Pod[]): string[] {
  return pods.flatMap((pod) => pod.metadata?.name ?? []);
}

const LACK_BEFORE_REFUSAL_MS = 5_000;
/** How long a refusal is watched before it is judged: the kubelet posts its events a moment after the pod's status. */
const EVENTS_LAG_MS = 2_000;
/**
 * How long a refusal of the kubelet's first pull is waited on for its second (its back-off is 10 s): the first may
 * have gone without the agent's login with no miss posted (a CI run saw a 401 for a missing tag, a login given).
 */
const FIRST_PULL_LAG_MS = 30_000;
/**
 * How long a refusal whose events are not posted yet is waited for before it is judged all the same (the kubelet
 * posts a miss before its refusal, in order, and may drop events of a pod that makes many).
 */
const UNPOSTED_LAG_MS = 10_000;

/**
 * Judges the refusals of one pull wait (a create's, a deploy's): final once it has been seen for EVENTS_LAG_MS
 * with the events of two refused pulls posted and no sign that the kubelet pulled without the agent's own login
 * (then its next pull is waited for); for FIRST_PULL_LAG_MS with one refused pull posted; for UNPOSTED_LAG_MS while
 * the kubelet has posted neither. The verdict is in the words of the last refused pull (pullWordsOf): the second
 * pull may say "not found" where the first said "unauthorized".
 */
export class RefusalJudge {
  /** What the events said of the refusal, and since when they said it: a change starts the watch afresh. */
  private seen: { readonly said: 'refused' | 'unposted'; readonly pulls: number; readonly sinceMs: number } | undefined;

  constructor(
    private readonly own: (secret: string) => boolean,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * The refusal's final words by the wait's pods' events as listed at this look: the last refused pull's, else
   * `stated` (the pod's status); undefined while it is not final.
   */
  verdict(events: readonly CoreV1Event[], stated: string): string | undefined {
    return this.final(events) ? (pullWordsOf(events) ?? stated) : undefined;
  }

  /** Judges the refusal by the wait's pods' events as listed at this look. */
  final(events: readonly CoreV1Event[]): boolean {
    const said = pullRefusalOf(events, this.own);
    if (said === 'lacked') {
      this.seen = undefined;
      return false;
    }
    const pulls = said === 'refused' ? refusedPullsOf(events) : 0;
    if (this.seen?.said !== said || this.seen.pulls !== pulls) this.seen = { said, pulls, sinceMs: this.now() };
    const lagMs = said === 'unposted' ? UNPOSTED_LAG_MS : pulls >= 2 ? EVENTS_LAG_MS : FIRST_PULL_LAG_MS;
    return this.now() - this.seen.sinceMs >= lagMs;
  }
}

/** The Secrets of the kubelet's "Unable to retrieve some image pull secrets (a, b); …"; none when it says otherwise. */
function secretsNamed(message: string | undefined): string[] {
  const list = /\(([^)]*)\)/.exec(message ?? '')?.[1];
  return list === undefined ? [''] : list.split(',').map((name) => name.trim());
}
