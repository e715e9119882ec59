import type { AppsV1Api, CoreV1Api, V1Deployment, V1Pod, V1VolumeMount } from '@kubernetes/client-node';
import { BOT_KUBE_USER } from '../../provisioning/bot-spec.js';
import { messages, NotFound, RuntimeUnavailable } from '../../errors.js';
import { BOT_LABEL } from '../labels.js';
import { withDeadline } from './kube-deadline.js';
import { apiStatus, translateKubeError } from './kube-errors.js';
import { claimNameOf } from './kube-data.js';
import { objectName } from './kube-names.js';

/** The label of a pod that reads or writes a bot's claim for its backups and restores: never the bot's own label. */
export const DATA_HELPER_LABEL = 'bot-agent/data-of';
/** How long a helper pod may take to run (its image is the bot's, on the bot's node: pulled already, most often). */
const RUNNING_DEADLINE_MS = 3 * 60_000;
const POLL_MS = 300;

/** The cluster calls the data's helpers make. */
export interface KubeDataApi {
  readonly core: CoreV1Api;
  readonly apps: AppsV1Api;
  readonly namespace: string;
}

/** The bot's Deployment (listed by its label, as the Role allows); NotFound where there is none of the bot's. */
export async function botDeployment(api: KubeDataApi, botId: string): Promise<V1Deployment> {
  try {
    const listed = await api.apps.listNamespacedDeployment({ namespace: api.namespace, labelSelector: `${BOT_LABEL}=${botId}` }, withDeadline());
    const deployment = listed.items.find((found) => found.metadata?.name === objectName(botId));
    if (!deployment) throw new NotFound(messages.botNotFound(botId));
    return deployment;
  } catch (err) {
    throw translateKubeError(err, botId);
  }
}

/** The node the bot's pod runs on, if it runs: a claim of ReadWriteOnce is mounted by the pods of one node at a time. */
export async function botNode(api: KubeDataApi, botId: string): Promise<string | undefined> {
  const pods = await api.core.listNamespacedPod({ namespace: api.namespace, labelSelector: `${BOT_LABEL}=${botId}` }, withDeadline());
  return pods.items.find((pod) => pod.spec?.nodeName && !pod.metadata?.deletionTimestamp && pod.status?.phase !== 'Succeeded' && pod.status?.phase !== 'Failed')?.spec?.nodeName;
}

/**
 * A pod of the bot's image, as the bot's own user (the restricted profile, as the bot's pod), mounting the bot's
 * claim, with no token of the cluster and no restart: the data's backups and restores run `tar`, `cp` and `rm` in it
 * (docs/api.md §20). `mounts` are the claim's subpaths (or the whole claim) and where they go.
 */
export function helperPod(
  deployment: V1Deployment,
  botId: string,
  options: { name: string; labels: Record<string, string>; annotations?: Record<string, string>; mounts: V1VolumeMount[]; script: string; args: string[]; node: string | undefined; graceS: number },
): V1Pod {
  const template = deployment.spec?.template.spec;
  return {
    metadata: { name: options.name, labels: { [DATA_HELPER_LABEL]: botId, ...options.labels }, ...(options.annotations ? { annotations: options.annotations } : {}) },
    spec: {
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: options.graceS,
      ...(options.node ? { nodeName: options.node } : {}),
      ...(template?.imagePullSecrets ? { imagePullSecrets: template.imagePullSecrets } : {}),
      securityContext: { runAsNonRoot: true, runAsUser: BOT_KUBE_USER, runAsGroup: BOT_KUBE_USER, fsGroup: BOT_KUBE_USER, seccompProfile: { type: 'RuntimeDefault' } },
      volumes: [{ name: 'claim', persistentVolumeClaim: { claimName: claimNameOf(objectName(botId)) } }],
      containers: [
        {
          name: 'data',
          image: template?.containers[0]?.image ?? '',
          // The node the bot ran on has its image: a `:latest` (pulled Always by default) is not asked of its registry
          // again for a helper, which a registry away would fail.
          imagePullPolicy: 'IfNotPresent',
          command: ['sh', '-c', options.script, ...options.args],
          volumeMounts: options.mounts,
          securityContext: { allowPrivilegeEscalation: false, privileged: false, capabilities: { drop: ['ALL'] } },
        },
      ],
    },
  };
}

/** Makes the pod and waits for it to run; one that cannot is removed, and the reason answered. */
export async function runHelper(api: KubeDataApi, pod: V1Pod, botId: string, signal: AbortSignal): Promise<V1Pod> {
  const name = pod.metadata?.name ?? '';
  try {
    await api.core.createNamespacedPod({ namespace: api.namespace, body: pod }, withDeadline());
  } catch (err) {
    throw translateKubeError(err, undefined);
  }
  const cannotRun = (why: string) => new RuntimeUnavailable(`the helper pod ${name} of bot ${botId}'s data could not run (${why.slice(0, 300)})`);
  try {
    return await awaitPod(
      api,
      name,
      (read) => {
        if (read?.status?.phase === 'Running') return read;
        const waiting = read?.status?.containerStatuses?.[0]?.state?.waiting;
        const stuck = read === undefined || read.status?.phase === 'Failed' || read.status?.phase === 'Succeeded' || /ErrImage|ImagePullBackOff|CreateContainerError|InvalidImageName/.test(waiting?.reason ?? '');
        if (stuck) throw cannotRun(waiting ? `${waiting.reason}: ${waiting.message ?? ''}` : `it is ${read?.status?.phase ?? 'gone'}`);
        return undefined;
      },
      RUNNING_DEADLINE_MS,
      () => cannotRun(`not running after ${RUNNING_DEADLINE_MS / 60_000} minutes`),
      signal,
    );
  } catch (err) {
    await removePod(api, name, 0).catch(() => undefined);
    throw translateKubeError(err, undefined);
  }
}

/**
 * Reads the pod every POLL_MS (undefined once it is gone) until `settled` answers what was waited for, or throws;
 * past `waitMs`, the error `late` makes. The one wait of the data's helper pods: to run, to end, to be gone.
 * A read the API server could not answer (no answer by its deadline, a 5xx, a 429) says nothing of the pod: the wait
 * goes on, and at its end the last such failure is thrown instead of `late`'s. Any other refusal ends it at once.
 */
export async function awaitPod<T>(
  api: KubeDataApi,
  name: string,
  settled: (pod: V1Pod | undefined) => T | undefined,
  waitMs: number,
  late: () => Error,
  signal?: AbortSignal,
): Promise<T> {
  const giveUpAt = Date.now() + waitMs;
  let unanswered: unknown;
  for (;;) {
    signal?.throwIfAborted();
    const read = await api.core.readNamespacedPod({ name, namespace: api.namespace }, withDeadline()).then(
      (pod): { pod: V1Pod | undefined } => ({ pod }),
      (err: unknown) => {
        if (apiStatus(err) === 404) return { pod: undefined };
        if (!unansweredRead(err)) throw err;
        unanswered = err;
        return undefined;
      },
    );
    const found = read && settled(read.pod);
    if (found !== undefined) return found;
    if (Date.now() > giveUpAt) throw read === undefined ? unanswered : late();
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/** A read that failed for the API server's sake, not the request's: asked again, it may well be answered. */
function unansweredRead(err: unknown): boolean {
  const status = apiStatus(err);
  return status === undefined || status === 429 || status >= 500;
}

/** Removes the pod (its TERM trap given `graceS`); one gone already is no failure. */
export async function removePod(api: KubeDataApi, name: string, graceS: number): Promise<void> {
  await api.core.deleteNamespacedPod({ name, namespace: api.namespace, gracePeriodSeconds: graceS }, withDeadline()).catch((err: unknown) => {
    if (apiStatus(err) !== 404) throw translateKubeError(err, undefined);
  });
}
