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
 * What the kubelet's events say of the last refused pull:
 * - `lacked`: it was the kubelet's own miss, not the registry's verdict: just before it the kubelet said it could not
 *   read Secrets the agent made itself (`own`: its Secret cache lags a Secret made just before the pod, under load)
 *   and pulled without them. Its next pull, after its back-off (10 s at least), has them. A Secret it could not read
 *   that the operator named (AGENT_IMAGE_PULL_SECRETS) is not waited for.
 * - `refused`: the refusal's event is posted with no such miss before it;
 * - `unposted`: neither is posted yet (a busy kubelet posts its events seconds after the pod's status).
 */
export async function pullRefusalOf(core: CoreV1Api, namespace: string, pods: readonly V1Pod[], own: (secret: string) => boolean): Promise<'lacked' | 'refused' | 'unposted'> {
  const events = await podEventsOf(core, namespace, pods);
  const latest = (matching: (event: CoreV1Event) => boolean) =>
    Math.max(-Infinity, ...events.filter(matching).map((event) => new Date(event.lastTimestamp ?? event.eventTime ?? event.firstTimestamp ?? 0).getTime()));
  const lacked = latest((event) => event.reason === 'FailedToRetrieveImagePullSecret' && secretsNamed(event.message).every(own));
  const refused = latest((event) => event.reason === 'Failed' && (event.message ?? '').startsWith('Failed to pull image'));
  // Events are stamped in whole seconds, and the miss comes a moment before its pull's refusal (the next second,
  // often): a miss up to 5 s before the refusal was that pull's; an earlier pull was 10 s or more before.
  if (lacked > -Infinity && lacked >= refused - LACK_BEFORE_REFUSAL_MS) return 'lacked';
  return refused > -Infinity ? 'refused' : 'unposted';
}

/**
 * The events of `pods` (of `reason` only, if given): a list per pod, its name in the field selector, never every
 * Pod event of the namespace (at 5,000 bots some 15,000, each encoded, sent and parsed at every poll; the API
 * server leaves out the others before it encodes the answer).
 */
export async function podEventsOf(core: CoreV1Api, namespace: string, pods: readonly V1Pod[], reason?: string): Promise<CoreV1Event[]> {
  const names = new Set(pods.flatMap((pod) => pod.metadata?.name ?? []));
  const selector = (name: string) => [...(reason ? [`reason=${reason}`] : []), 'involvedObject.kind=Pod', `involvedObject.name=${name}`].join(',');
  const lists = await Promise.all([...names].map((name) => core.listNamespacedEvent({ namespace, fieldSelector: selector(name) }, withDeadline())));
  return lists.flatMap((list) => list.items);
}

const LACK_BEFORE_REFUSAL_MS = 5_000;
/** How long a refusal is watched before it is judged: the kubelet posts its events a moment after the pod's status. */
const EVENTS_LAG_MS = 2_000;
/**
 * How long a refusal whose events are not posted yet is waited for before it is judged all the same (the kubelet
 * posts a miss before its refusal, in order, and may drop events of a pod that makes many).
 */
const UNPOSTED_LAG_MS = 10_000;

/**
 * Judges the refusals of one pull wait (a create's, a deploy's): final once it has been seen for EVENTS_LAG_MS
 * with its event posted and no sign that the kubelet pulled without the agent's own login (then its next pull is
 * waited for); for UNPOSTED_LAG_MS while the kubelet has posted neither.
 */
export class RefusalJudge {
  /** What the events said of the refusal, and since when they said it: a change starts the watch afresh. */
  private seen: { readonly said: 'refused' | 'unposted'; readonly sinceMs: number } | undefined;

  constructor(
    private readonly core: CoreV1Api,
    private readonly namespace: string,
    private readonly own: (secret: string) => boolean,
    private readonly now: () => number = Date.now,
  ) {}

  async final(pods: readonly V1Pod[]): Promise<boolean> {
    const said = await pullRefusalOf(this.core, this.namespace, pods, this.own);
    if (said === 'lacked') {
      this.seen = undefined;
      return false;
    }
    if (this.seen?.said !== said) this.seen = { said, sinceMs: this.now() };
    return this.now() - this.seen.sinceMs >= (said === 'refused' ? EVENTS_LAG_MS : UNPOSTED_LAG_MS);
  }
}

/** The Secrets of the kubelet's "Unable to retrieve some image pull secrets (a, b); …"; none when it says otherwise. */
function secretsNamed(message: string | undefined): string[] {
  const list = /\(([^)]*)\)/.exec(message ?? '')?.[1];
  return list === undefined ? [''] : list.split(',').map((name) => name.trim());
}
