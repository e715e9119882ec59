import { randomBytes } from 'node:crypto';
import { posix } from 'node:path';
import type { Readable } from 'node:stream';
import type { KubeConfig } from '@kubernetes/client-node';
import type { BotDataArchives } from '../../backups/data-archives.js';
import { dataFolderKey } from '../../data/bot-data.js';
import { dataFoldersOf } from './kube-data.js';
import { botDeployment, botNode, helperPod, removePod, runHelper } from './kube-data-pods.js';
import type { KubeDataApi } from './kube-data-pods.js';
import { streamFromPod } from './kube-exec-stream.js';
import { objectName } from './kube-names.js';

/** Where a read's helper mounts the folder: its last name under this, so that the tar's entries are under that name. */
const READ_ROOT = '/bot-agent-data';
/** A read helper lives at most this long: longer than any one folder's read (docs/api.md §20). */
const READ_HELPER_LIFE_S = 2 * 60 * 60;

/**
 * A bot's data folders on Kubernetes (docs/api.md §19, §20), read as `kubectl cp` reads a pod's files: `tar` run
 * over the API server in a helper pod of the bot's image that mounts the folder's subpath of the bot's claim, on the
 * bot's node where it runs, whether the bot runs or not. The folders' bytes are not measured (no `usage`).
 */
export class KubeDataArchives implements BotDataArchives {
  constructor(
    private readonly kubeConfig: KubeConfig,
    private readonly api: KubeDataApi,
  ) {}

  async folders(botId: string): Promise<readonly string[]> {
    return dataFoldersOf((await botDeployment(this.api, botId)).spec?.template);
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
