import { posix } from 'node:path';
import { pipeline } from 'node:stream';
import type { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import type { KubeConfig, V1Deployment, V1Pod } from '@kubernetes/client-node';
import type { BotDataRestores, FolderArchive, LeftRestore, ScratchRestore } from '../../backups/data-restores.js';
import { dataFolderKey } from '../../data/bot-data.js';
import { RuntimeUnavailable } from '../../errors.js';
import { RESTORE_BEGUN_LABEL, RESTORE_OF_LABEL, RESTORE_START_LABEL, RESTORE_STEP_LABEL, RESTORE_TAG_LABEL } from '../labels.js';
import { dataSizesOf } from './kube-data.js';
import { awaitPod, botDeployment, botNode, DATA_HELPER_LABEL, helperPod, removePod, runHelper } from './kube-data-pods.js';
import type { KubeDataApi } from './kube-data-pods.js';
import { withDeadline } from './kube-deadline.js';
import { apiStatus, translateKubeError } from './kube-errors.js';
import { streamFromPod } from './kube-exec-stream.js';
import { objectName } from './kube-names.js';

/** Where a restore's helpers mount the bot's whole claim. */
const CLAIM_ROOT = '/c';
/** How long a restore waits for its swap to end, and how long its fill helper lives (past the restore's hour and the swap's). */
const SWAP_WAIT_MS = 60 * 60_000;
const FILL_LIFE_S = 3 * 60 * 60;

/**
 * The swap, run by the cluster in a pod of its own: each of the bot's folders (`/c/<key>`, a subpath of its claim)
 * emptied and filled with its scratch copy, modes kept; then the scratch copy renamed away and removed. It runs to
 * its end whether or not the agent that made it lives. A scratch copy gone (removed with its fill helper) stops it
 * before anything is touched.
 */
const SWAP_SCRIPT = `set -e
s=$0
if [ -d "$s.swapped" ]; then rm -rf "$s.swapped"; exit 0; fi
[ -d "$s" ] || { echo "the restore's scratch copy $s is gone: nothing was touched" >&2; exit 3; }
while [ $# -ge 3 ]; do
  i=$1; key=$2; base=$3; shift 3
  mkdir -p "${CLAIM_ROOT}/$key"
  rm -rf "${CLAIM_ROOT}/$key/"* "${CLAIM_ROOT}/$key/".[!.]* "${CLAIM_ROOT}/$key/"..?*
  cp -a "$s/$i/$base/." "${CLAIM_ROOT}/$key/"
done
mv "$s" "$s.swapped"
rm -rf "$s.swapped"`;

/** The fill helper waits, holding the scratch copy; removed (its TERM) or at the end of its life, it removes the copy. */
const FILL_SCRIPT = `trap 'rm -rf "$0"; exit 0' TERM; sleep ${FILL_LIFE_S} & wait; rm -rf "$0"`;

const scratchDir = (tag: string): string => `${CLAIM_ROOT}/.bot-agent-restore-${tag}`;

/**
 * Restores of bots' data on Kubernetes (docs/api.md §20). A restore's scratch copy is a folder of the bot's own
 * claim, beside its folders, unpacked by `tar` over the API server in a fill helper pod of the bot's image that
 * holds it while it lives; the swap is a second pod that the cluster runs to its end. Both carry the restore's
 * labels, so the cluster itself is the record an agent killed mid-way is taken up from.
 */
export class KubeDataRestores implements BotDataRestores {
  constructor(
    private readonly kubeConfig: KubeConfig,
    private readonly api: KubeDataApi,
  ) {}

  async sizes(botId: string): Promise<ReadonlyMap<string, number | undefined>> {
    return dataSizesOf(await botDeployment(this.api, botId));
  }

  async scratch(botId: string, archives: readonly FolderArchive[], { tag, startAfter, signal }: { tag: string; startAfter: boolean; signal: AbortSignal }): Promise<ScratchRestore> {
    const deployment = await botDeployment(this.api, botId);
    const name = `${objectName(botId)}-restore-${tag}`;
    const pod = helperPod(deployment, botId, {
      name,
      labels: { [RESTORE_OF_LABEL]: botId, [RESTORE_TAG_LABEL]: tag, [RESTORE_STEP_LABEL]: 'fill' },
      annotations: { [RESTORE_BEGUN_LABEL]: new Date().toISOString(), [RESTORE_START_LABEL]: startAfter ? 'true' : 'false' },
      mounts: [{ name: 'claim', mountPath: CLAIM_ROOT }],
      script: FILL_SCRIPT,
      args: [scratchDir(tag)],
      node: await botNode(this.api, botId),
      // Its trap removes the scratch copy: time for that.
      graceS: 120,
    });
    const made = new KubeRestore(this.kubeConfig, this.api, botId, tag, archives, deployment);
    try {
      made.fill = await runHelper(this.api, pod, botId, signal);
      for (const [index, archive] of archives.entries()) {
        const into = `${scratchDir(tag)}/${index}`;
        const command = await made.run(['sh', '-c', 'mkdir -p "$0" && tar xp -C "$0"', into], signal, pipeline(archive.open(), createGunzip(), () => undefined));
        command.output.resume();
        await command.ended;
      }
      return made;
    } catch (err) {
      await made.discard().catch(() => undefined);
      throw translateKubeError(err, botId);
    }
  }

  async leftovers(): Promise<LeftRestore[]> {
    const found = new Map<string, LeftRestore>();
    for (const pod of await restorePods(this.api, RESTORE_TAG_LABEL)) {
      const labels = pod.metadata?.labels ?? {};
      const botId = labels[RESTORE_OF_LABEL];
      const tag = labels[RESTORE_TAG_LABEL];
      if (botId === undefined || tag === undefined || found.has(tag)) continue;
      const annotations = pod.metadata?.annotations ?? {};
      const begun = Date.parse(annotations[RESTORE_BEGUN_LABEL] ?? '');
      found.set(tag, { botId, tag, begunAt: Number.isNaN(begun) ? undefined : new Date(begun), startAfter: annotations[RESTORE_START_LABEL] === 'true' });
    }
    // Read helpers an agent died with end by themselves; their pods go here.
    for (const pod of await restorePods(this.api, `${DATA_HELPER_LABEL},!${RESTORE_TAG_LABEL}`)) {
      if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') await removePod(this.api, pod.metadata?.name ?? '', 0).catch(() => undefined);
    }
    return [...found.values()];
  }

  async settle({ botId, tag }: LeftRestore): Promise<void> {
    const restore = new KubeRestore(this.kubeConfig, this.api, botId, tag, []);
    const swap = (await restorePods(this.api, `${RESTORE_TAG_LABEL}=${tag},${RESTORE_STEP_LABEL}=swap`))[0];
    // A swap begun is carried to its end (run again once where it failed); one not begun leaves the data as it was.
    if (swap) await restore.finish(swap);
    await restore.discard();
  }
}

class KubeRestore implements ScratchRestore {
  fill: V1Pod | undefined;

  constructor(
    private readonly kubeConfig: KubeConfig,
    private readonly api: KubeDataApi,
    private readonly botId: string,
    private readonly tag: string,
    private readonly archives: readonly FolderArchive[],
    /** The bot's Deployment as the fill read it: the swap's image and pull Secrets are the fill's. */
    private readonly deployment?: V1Deployment,
  ) {}

  run(argv: string[], signal: AbortSignal, input?: Readable) {
    return streamFromPod(this.kubeConfig, { namespace: this.api.namespace, pod: this.fill?.metadata?.name ?? '', container: 'data' }, argv, signal, input);
  }

  async read(path: string, signal: AbortSignal): Promise<Readable> {
    const index = this.archives.findIndex((archive) => archive.path === path);
    if (!this.fill || index < 0) throw new Error(`the restore holds no scratch copy of ${path}`);
    return (await this.run(['tar', 'c', '-C', `${scratchDir(this.tag)}/${index}`, posix.basename(path)], signal)).output;
  }

  async swap(signal: AbortSignal): Promise<void> {
    if (!this.fill) throw new Error('the restore was not filled');
    const deployment = this.deployment ?? (await botDeployment(this.api, this.botId));
    const pod = helperPod(deployment, this.botId, {
      name: `${objectName(this.botId)}-restore-${this.tag}-swap`,
      labels: { [RESTORE_OF_LABEL]: this.botId, [RESTORE_TAG_LABEL]: this.tag, [RESTORE_STEP_LABEL]: 'swap' },
      annotations: this.fill.metadata?.annotations ?? {},
      mounts: [{ name: 'claim', mountPath: CLAIM_ROOT }],
      script: SWAP_SCRIPT,
      args: [scratchDir(this.tag), ...this.archives.flatMap((archive, index) => [String(index), dataFolderKey(archive.path), posix.basename(archive.path)])],
      // Beside the fill helper, which holds the claim.
      node: this.fill.spec?.nodeName,
      graceS: 30,
    });
    signal.throwIfAborted();
    try {
      await this.api.core.createNamespacedPod({ namespace: this.api.namespace, body: pod }, withDeadline());
    } catch (err) {
      // A create the API server may have taken is carried on, never cut: the swap is looked for as any left one.
      if (apiStatus(err) !== undefined && apiStatus(err) !== 409) throw translateKubeError(err, this.botId);
    }
    const [made] = await restorePods(this.api, `${RESTORE_TAG_LABEL}=${this.tag},${RESTORE_STEP_LABEL}=swap`);
    if (!made) throw new RuntimeUnavailable(`the restore's swap pod of bot ${this.botId} could not be made; nothing of its data was touched`);
    await this.finish(made);
  }

  /** Waits for the swap pod to end; one that failed is made again once (it starts from the scratch copy, not from what it left). */
  async finish(swap: V1Pod): Promise<void> {
    const name = swap.metadata?.name ?? '';
    for (let attempt = 0; ; attempt++) {
      const ended = (pod: V1Pod | undefined): V1Pod | undefined => {
        if (pod === undefined) throw new Error(`the restore's swap pod ${name} of bot ${this.botId} is gone before it ended`);
        return pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed' ? pod : undefined;
      };
      // The cluster runs it on past the wait; the agent stops waiting (the restore answers its failure, the next agent settles it).
      const pod = await awaitPod(this.api, name, ended, SWAP_WAIT_MS, () => new Error(`the restore's copy into bot ${this.botId}'s data ran past ${SWAP_WAIT_MS / 60_000} minutes`));
      if (pod.status?.phase === 'Succeeded') return;
      const output = await this.api.core.readNamespacedPodLog({ name, namespace: this.api.namespace, tailLines: 20 }, withDeadline()).catch(() => '');
      if (attempt > 0) throw new Error(`the restore's copy into bot ${this.botId}'s data failed (exit ${pod.status?.containerStatuses?.[0]?.state?.terminated?.exitCode}): ${String(output).slice(-500)}`);
      await removePod(this.api, name, 0);
      await awaitPod(this.api, name, (there) => (there === undefined ? true : undefined), 60_000, () => new Error(`the failed swap pod ${name} of a restore is not gone`));
      const again: V1Pod = { metadata: { name, labels: swap.metadata?.labels, annotations: swap.metadata?.annotations }, spec: swap.spec };
      await this.api.core.createNamespacedPod({ namespace: this.api.namespace, body: again }, withDeadline());
      swap = again;
    }
  }

  /**
   * Removes the restore's pods (the fill helper's trap removes the scratch copy). A swap still running is left to
   * run, and this fails: the scratch copy it reads must outlive it, so the next agent settles the restore.
   */
  async discard(): Promise<void> {
    const pods = await restorePods(this.api, `${RESTORE_TAG_LABEL}=${this.tag}`);
    const swap = pods.find((pod) => pod.metadata?.labels?.[RESTORE_STEP_LABEL] === 'swap');
    if (swap && swap.status?.phase !== 'Succeeded' && swap.status?.phase !== 'Failed') {
      throw new Error(`the restore's swap of bot ${this.botId}'s data still runs; it is settled later`);
    }
    for (const pod of pods) await removePod(this.api, pod.metadata?.name ?? '', pod === swap ? 0 : 120);
  }
}

async function restorePods(api: KubeDataApi, labelSelector: string): Promise<V1Pod[]> {
  try {
    return (await api.core.listNamespacedPod({ namespace: api.namespace, labelSelector }, withDeadline())).items;
  } catch (err) {
    throw translateKubeError(err, undefined);
  }
}

