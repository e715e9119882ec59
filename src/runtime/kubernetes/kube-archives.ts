import { randomBytes } from 'node:crypto';
import { posix } from 'node:path';
import type { Readable } from 'node:stream';
import type { KubeConfig, V1Deployment } from '@kubernetes/client-node';
import type { BotDataArchives } from '../../backups/data-archives.js';
import { dataFolderKey } from '../../data/bot-data.js';
import type { DataUse } from '../../data/data-usage.js';
import { mapLimited } from '../../map-limited.js';
import { BOT_LABEL } from '../labels.js';
import { dataFoldersOf, dataSizesOf } from './kube-data.js';
import { withDeadline } from './kube-deadline.js';
import { execInPod } from './kube-exec.js';
import { botDeployment, botNode, helperPod, removePod, runHelper } from './kube-data-pods.js';
import type { KubeDataApi } from './kube-data-pods.js';
import { streamFromPod } from './kube-exec-stream.js';
import { objectName } from './kube-names.js';

/** Where a read's helper mounts the folder: its last name under this, so that the tar's entries are under that name. */
const READ_ROOT = '/bot-agent-data';
/** A read helper lives at most this long: longer than any one folder's read (docs/api.md §20). */
const READ_HELPER_LIFE_S = 2 * 60 * 60;

/** How many running bots' folders are measured at once, and how long one bot's `du` may take. */
const MEASURED_AT_ONCE = 4;
const MEASURE_DEADLINE_MS = 20_000;

/**
 * A bot's data folders on Kubernetes (docs/api.md §19, §20), read as `kubectl cp` reads a pod's files: `tar` run
 * over the API server in a helper pod of the bot's image that mounts the folder's subpath of the bot's claim, on the
 * bot's node where it runs, whether the bot runs or not. Their bytes are measured by `du` in each running bot's pod.
 */
export class KubeDataArchives implements BotDataArchives {
  constructor(
    private readonly kubeConfig: KubeConfig,
    private readonly api: KubeDataApi,
    /** The bots' Deployments as the driver's watch holds them, where it does. */
    private readonly watchedDeployments?: () => readonly V1Deployment[] | undefined,
  ) {}

  async folders(botId: string): Promise<readonly string[]> {
    return dataFoldersOf((await botDeployment(this.api, botId)).spec?.template);
  }

  /**
   * The folders of every running bot that has some, measured by `du -sk` in its own pod (a few pods at a time);
   * a stopped bot's, or one whose `du` fails (an image without it), are not measured this round.
   */
  async usage(): Promise<readonly DataUse[]> {
    const { apps, core, namespace } = this.api;
    // The driver's watch holds the Deployments (a list only without it); pods are asked for only of bots with data.
    const deployments =
      this.watchedDeployments?.() ?? (await apps.listNamespacedDeployment({ namespace, labelSelector: BOT_LABEL }, withDeadline({}, MEASURE_DEADLINE_MS))).items;
    const withData = deployments.flatMap((deployment) => {
      const botId = deployment.metadata?.labels?.[BOT_LABEL] ?? '';
      const folders = dataFoldersOf(deployment.spec?.template);
      return folders.length > 0 && deployment.metadata?.name === objectName(botId) && (deployment.spec?.replicas ?? 1) > 0 ? [{ botId, folders, sizes: dataSizesOf(deployment) }] : [];
    });
    const measured = await mapLimited(withData, MEASURED_AT_ONCE, async (bot) => {
      const pods = await core.listNamespacedPod({ namespace, labelSelector: `${BOT_LABEL}=${bot.botId}` }, withDeadline({}, MEASURE_DEADLINE_MS)).catch(() => undefined);
      const pod = pods?.items.find((found) => found.status?.phase === 'Running' && !found.metadata?.deletionTimestamp)?.metadata?.name;
      return pod === undefined ? [] : [{ ...bot, pod }];
    });
    const uses = await mapLimited(measured.flat(), MEASURED_AT_ONCE, async ({ botId, pod, folders, sizes }) => {
      const ran = await execInPod(this.kubeConfig, { namespace, pod, container: 'bot' }, ['du', '-sk', '--', ...folders], { timeoutMs: MEASURE_DEADLINE_MS, maxBytes: 4_096 }).catch(() => undefined);
      if (ran?.exitCode !== 0) return [];
      // `du` says each folder on a line of its own: its KiB, a tab, the path as given.
      const kibByPath = new Map(ran.output.split('\n').map((line) => [line.slice(line.indexOf('\t') + 1), Number(line.slice(0, line.indexOf('\t')))]));
      return folders.flatMap((path) => {
        const kib = kibByPath.get(path);
        return kib === undefined || !Number.isSafeInteger(kib) ? [] : [{ botId, path, sizeMb: sizes.get(path), bytes: kib * 1024 }];
      });
    });
    return uses.flat();
  }

  async read(botId: string, path: string, signal: AbortSignal): Promise<Readable> {
    const deployment = await botDeployment(this.api, botId);
    const name = `${objectName(botId)}-read-${randomBytes(4).toString('hex')}`;
    const base = posix.basename(path);
    const pod = helperPod(deployment, botId, {
      name,
      labels: {},
      mounts: [{ name: 'claim', mountPath: `${READ_ROOT}/${base}`, subPath: dataFolderKey(path), readOnly: true }],
      script: `trap "exit 0" TERM; sleep ${READ_HELPER_LIFE_S} & wait`,
      args: [],
      node: await botNode(this.api, botId),
      graceS: 1,
    });
    await runHelper(this.api, pod, botId, signal);
    try {
      const command = await streamFromPod(this.kubeConfig, { namespace: this.api.namespace, pod: name, container: 'data' }, ['tar', 'c', '-C', READ_ROOT, base], signal);
      void command.ended.catch(() => undefined).finally(() => removePod(this.api, name, 0).catch(() => undefined));
      return command.output;
    } catch (err) {
      await removePod(this.api, name, 0).catch(() => undefined);
      throw err;
    }
  }
}
