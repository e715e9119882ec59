import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import type { CoreV1Event, KubeConfig, V1Container, V1Deployment, V1EnvVar, V1Pod, V1PodSpec, V1PodTemplateSpec, V1Probe, V1ResourceRequirements } from '@kubernetes/client-node';
import { AlreadyExists, messages, NotFound, OperationFailed, PullTooSlow, RegistryRefused, Unprocessable } from '../../errors.js';
import type { AgentError } from '../../errors.js';
import { BOT_KUBE_USER, botEnvironment, TEMPLATE_LABEL, TOKEN_VARIABLES } from '../../provisioning/bot-spec.js';
import type { BotHealthSpec, BotSpec, BotSummary } from '../../provisioning/bot-spec.js';
import { healthPolicyLabels, restartPolicyLabels } from '../health-policy.js';
import type { Provisioner, RemovedBot, RemoveOptions } from '../../provisioning/provisioner.js';
import { DOCKER_HUB, registryOf } from '../../provisioning/image-reference.js';
import type { RegistryLogin } from '../../provisioning/registry-credentials.js';
import { BOT_LABEL, OWNER_LABEL, REVISION_LABEL } from '../labels.js';
import type { BotChange } from '../../provisioning/revisions.js';
import { keptTemplate, KubeRevisions, revisionOf } from './kube-revisions.js';
import { namesOf, podEventsOf, pullState, pullWordsOf, RefusalJudge } from './kube-pull-state.js';
import { DEFAULT_PULL_TIMEOUT_MS, pullFailure } from '../pull-failure.js';
import { checkRegistry } from '../../provisioning/registry-policy.js';
import { withDeadline } from './kube-deadline.js';
import { apiStatus, translateKubeError } from './kube-errors.js';
import { objectName } from './kube-names.js';
import { claimData, claimNameOf, DATA_SIZES_ANNOTATION, dataFoldersOf, dataMounts, removeClaim } from './kube-data.js';
import { KubeDataArchives } from './kube-archives.js';
import { KubeDataRestores } from './kube-restores.js';
import { TOKEN_AUDIENCE, TOKEN_MOUNT, TOKEN_PATH } from './kube-token-review.js';

export interface KubernetesProvisionerOptions {
  readonly kubeConfig: KubeConfig;
  readonly namespace: string;
  /** PLATFORM_AGENT_URL for every bot. */
  readonly agentUrl: string;
  /** Secrets of the bots' namespace every bot's pod pulls its image with (AGENT_IMAGE_PULL_SECRETS, docs/api.md §14). */
  readonly pullSecrets?: readonly string[] | undefined;
  /** How long a create waits for the kubelet to pull its image (AGENT_PULL_TIMEOUT_S). */
  readonly pullTimeoutMs?: number | undefined;
  /** The registries images may come from (AGENT_REGISTRIES); undefined: any but loopback, private and link-local addresses. */
  readonly registries?: readonly string[] | undefined;
  /** The bots' Deployments as the driver's watch holds them (KubernetesDriver.watchedDeployments). */
  readonly watchedDeployments?: () => readonly V1Deployment[] | undefined;
  /** False: a create returns once its Deployment is made, without waiting for the image (the test API server runs no pods). */
  readonly awaitImage?: boolean | undefined;
  /** Backups and restores of bots' data through helper pods (docs/api.md §20); false: none (the Role grants no pods). */
  readonly backups?: boolean | undefined;
}

/** How often a create looks at its pod while the kubelet pulls. */
const IMAGE_LOOK_MS = 500;

const TOKEN_KEY = 'token';
const pullSecretOf = (name: string): string => `${name}-pull`;

/** A create's registry login as the kubelet reads it: a Secret's `.dockerconfigjson`, by the image's registry host. */
function dockerConfigJson(image: string, login: RegistryLogin): string {
  const registry = registryOf(image);
  const host = registry === DOCKER_HUB ? 'https://index.docker.io/v1/' : registry;
  const auth = Buffer.from(`${login.username}:${login.password}`).toString('base64');
  return JSON.stringify({ auths: { [host]: { username: login.username, password: login.password, auth } } });
}
const failedTo = (verb: string, botId: string) => (detail: string) => new OperationFailed(`Failed to ${verb} bot ${botId}: ${detail}`);


/**
 * Bots as a Deployment of one replica each, their token in a Secret read through secretKeyRef, their data folders
 * in a claim of their own (docs/api.md §19).
 */
class KubernetesProvisioner implements Provisioner {
  private readonly apps: AppsV1Api;
  private readonly core: CoreV1Api;
  readonly revisions: KubeRevisions;
  readonly dataArchives: KubeDataArchives | undefined;
  readonly dataRestores: KubeDataRestores | undefined;

  constructor(private readonly options: KubernetesProvisionerOptions) {
    this.apps = options.kubeConfig.makeApiClient(AppsV1Api);
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
    const dataApi = { core: this.core, apps: this.apps, namespace: options.namespace };
    this.dataArchives = options.backups === false ? undefined : new KubeDataArchives(options.kubeConfig, dataApi, options.watchedDeployments);
    this.dataRestores = options.backups === false ? undefined : new KubeDataRestores(options.kubeConfig, dataApi);
    this.revisions = new KubeRevisions(this.apps, this.core, options.kubeConfig, options.namespace, (template, change, revision) =>
      this.changedTemplate(template, change, revision),
      options.watchedDeployments,
    );
  }

  /** A deploy's pod template (docs/api.md §15): the bot's current one with what the change names; its login a Secret as a create's is. */
  private async changedTemplate(template: V1PodTemplateSpec, change: BotChange, revision: number): Promise<V1PodTemplateSpec> {
    const container = template.spec!.containers[0]!;
    if (change.image !== undefined) {
      checkRegistry(change.image, this.options.registries, 'is not deployed:');
      container.image = change.image;
    }
    if (change.command !== undefined) container.command = [...change.command];
    for (const [name, value] of Object.entries(change.env ?? {})) {
      const env = container.env ?? (container.env = []);
      const at = env.findIndex((entry) => entry.name === name);
      if (at >= 0) env[at] = { name, value };
      else env.push({ name, value });
    }
    if (change.memoryLimitBytes !== undefined || change.cpuLimit !== undefined) {
      const limits = container.resources?.limits ?? {};
      container.resources = botResources({
        memoryLimitBytes: change.memoryLimitBytes ?? (limits.memory === undefined ? undefined : Number(limits.memory)),
        cpuLimit: change.cpuLimit ?? (limits.cpu === undefined ? undefined : Number.parseInt(limits.cpu, 10) / 1000),
      });
    }
    if (change.health !== undefined) {
      delete container.livenessProbe;
      delete container.readinessProbe;
      Object.assign(container, probesOf(change.health));
    }
    if (change.registryLogin !== undefined) {
      // A Secret of this revision's own: the revision kept to go back to keeps pulling with its own login.
      const own = pullSecretOf(objectName(template.metadata?.labels?.[BOT_LABEL] ?? ''));
      const name = `${own}-r${revision}`;
      const body = {
        metadata: { name, labels: { [BOT_LABEL]: template.metadata?.labels?.[BOT_LABEL] ?? '' } },
        type: 'kubernetes.io/dockerconfigjson',
        stringData: { '.dockerconfigjson': dockerConfigJson(container.image ?? '', change.registryLogin) },
      };
      await this.core.deleteNamespacedSecret({ name, namespace: this.options.namespace }, withDeadline()).catch(() => undefined);
      await this.core.createNamespacedSecret({ namespace: this.options.namespace, body }, withDeadline());
      template.spec!.imagePullSecrets = [...(template.spec!.imagePullSecrets ?? []).filter((secret) => !secret.name?.startsWith(own)), { name }];
    }
    template.metadata = { ...template.metadata, annotations: { ...template.metadata?.annotations, [REVISION_LABEL]: String(revision) } };
    return template;
  }

  async create(spec: BotSpec): Promise<void> {
    checkRegistry(spec.image, this.options.registries, 'is not made into a bot:');
    const namespace = this.options.namespace;
    const name = objectName(spec.id);
    const failed = failedTo('create', spec.id);
    // The Secrets (and the claim) this create made: a failed create removes them, and nothing it did not make.
    const made: string[] = [];
    let claimMade = false;
    const removeMade = async () => {
      await this.removeSecrets(made);
      if (claimMade) await removeClaim(this.core, namespace, claimNameOf(name)).catch(() => undefined);
    };
    try {
      if ((await this.deployments(spec.id)).length > 0) throw new AlreadyExists(`bot ${spec.id} exists already`);
      if ((spec.data ?? []).length > 0) claimMade = await claimData(this.core, namespace, spec.id, claimNameOf(name), spec.data ?? []);
      await this.core.createNamespacedSecret(
        {
          namespace,
          body: {
            metadata: { name: `${name}-token`, labels: { [BOT_LABEL]: spec.id } },
            type: 'Opaque',
            stringData: { [TOKEN_KEY]: spec.token },
          },
        },
        withDeadline(),
      );
      made.push(`${name}-token`);
      if (spec.registryLogin) {
        await this.core.createNamespacedSecret(
          {
            namespace,
            body: {
              metadata: { name: pullSecretOf(name), labels: { [BOT_LABEL]: spec.id } },
              type: 'kubernetes.io/dockerconfigjson',
              stringData: { '.dockerconfigjson': dockerConfigJson(spec.image, spec.registryLogin) },
            },
          },
          withDeadline(),
        );
        made.push(pullSecretOf(name));
      }
    } catch (err) {
      await removeMade();
      if (apiStatus(err) === 409) throw new AlreadyExists(`bot ${spec.id} exists already`);
      throw translateKubeError(err, undefined, failed);
    }
    try {
      await this.apps.createNamespacedDeployment({ namespace, body: this.deploymentFor(spec, name) }, withDeadline());
    } catch (err) {
      // Leave nothing half-made: the Secrets and the claim go with the failed create.
      await removeMade();
      if (apiStatus(err) === 409) throw new AlreadyExists(`bot ${spec.id} exists already`);
      // Invalid (422) or malformed (400): the cluster refused what the request asked for.
      const status = apiStatus(err);
      if (status === 400 || status === 422) {
        throw translateKubeError(err, undefined, (detail) => new Unprocessable(`bot ${spec.id} cannot run as asked: ${detail}`));
      }
      throw translateKubeError(err, undefined, failed);
    }
    if (this.options.awaitImage === false) return;
    const refused = await this.imageRefusal(spec).catch((err: unknown) => translateKubeError(err, undefined, failed));
    if (refused === undefined) return;
    // As on Docker, a create whose image cannot be pulled leaves nothing behind (docs/api.md §14).
    await this.apps.deleteNamespacedDeployment({ name, namespace }, withDeadline()).catch(() => undefined);
    await removeMade();
    throw refused;
  }

  /**
   * Waits for the kubelet to pull the bot's image: undefined once it has, or at once when the scheduler finds
   * no room for the pod or the cluster refuses to make it (it waits for those, not for a pull), or at the
   * deadline with the pod not yet on a node;
   * the failure in the kubelet's words when it cannot pull, or PullTooSlow past AGENT_PULL_TIMEOUT_S.
   */
  private async imageRefusal(spec: BotSpec): Promise<AgentError | undefined> {
    const timeoutMs = this.options.pullTimeoutMs ?? DEFAULT_PULL_TIMEOUT_MS;
    const deadline = Date.now() + timeoutMs;
    const refusals = new RefusalJudge((secret) => secret === pullSecretOf(objectName(spec.id)));
    for (;;) {
      const pods = (await this.core.listNamespacedPod({ namespace: this.options.namespace, labelSelector: `${BOT_LABEL}=${spec.id}` }, withDeadline())).items;
      const state = pullState(pods);
      if (state.kind === 'pulled' || state.kind === 'unschedulable') return undefined;
      if (pods.length === 0 && (await this.cannotMakePods(spec))) return undefined;
      if (state.kind === 'failed') {
        // One list of the pods' events a look, read only when wanted: for the kubelet's words (ErrImagePull
        // carries them; a back-off only points at them) and to judge a registry's refusal.
        let events: Promise<CoreV1Event[]> | undefined;
        const eventsOf = () => (events ??= podEventsOf(this.core, this.options.namespace, namesOf(pods)));
        const words =
          state.reason === 'ErrImagePull' && state.message ? state.message : (pullWordsOf(await eventsOf().catch(() => [])) ?? state.message ?? state.reason);
        const failure = pullFailure(spec.image, words, undefined);
        if (!(failure instanceof RegistryRefused)) return failure;
        const verdict = refusals.verdict(await eventsOf(), words);
        if (verdict !== undefined) return pullFailure(spec.image, verdict, undefined);
      }
      if (Date.now() >= deadline) {
        const scheduled = pods.some((pod) => pod.spec?.nodeName);
        return scheduled ? new PullTooSlow(`the kubelet's pull of image ${spec.image} took longer than ${timeoutMs / 1000} s (AGENT_PULL_TIMEOUT_S); the bot was removed`) : undefined;
      }
      await new Promise((resolve) => setTimeout(resolve, IMAGE_LOOK_MS));
    }
  }

  /** True when the bot's ReplicaSet is refused its pod (a quota, an admission policy): it waits for them, not for a pull. */
  private async cannotMakePods(spec: BotSpec): Promise<boolean> {
    const [deployment] = await this.deployments(spec.id);
    return (deployment?.status?.conditions ?? []).some((condition) => condition.type === 'ReplicaFailure' && condition.status === 'True');
  }

  async list(ownerId: string | undefined): Promise<BotSummary[]> {
    try {
      const [deployments, pods] = await Promise.all([
        this.deployments(undefined),
        this.core.listNamespacedPod({ namespace: this.options.namespace, labelSelector: BOT_LABEL }, withDeadline()),
      ]);
      return deployments
        .filter((deployment) => ownerId === undefined || deployment.metadata?.annotations?.[OWNER_LABEL] === ownerId)
        .map((deployment) => summaryOf(deployment, pods.items));
    } catch (err) {
      throw translateKubeError(err, undefined);
    }
  }

  async remove(botId: string, options: RemoveOptions = {}): Promise<RemovedBot> {
    const namespace = this.options.namespace;
    try {
      const [deployment] = await this.deployments(botId);
      const name = deployment?.metadata?.name;
      if (!name) {
        // A removal cut short after its Deployment went: what it left of the bot goes now, with data kept before
        // unless it is kept again.
        await this.removeLabelledSecrets(botId).catch(() => undefined);
        // As the Secrets: a Role without claims (an older chart, or claims off) still answers the 404.
        if (options.keepData !== true) await removeClaim(this.core, namespace, claimNameOf(objectName(botId))).catch(() => undefined);
        throw new NotFound(messages.botNotFound(botId));
      }
      const dataFolders = dataFoldersOf(deployment.spec?.template);
      await this.apps.deleteNamespacedDeployment({ name, namespace }, withDeadline());
      // Every Secret made for it (its token, its revisions' logins, one an agent killed mid-deploy left) in one call;
      // under a Role of an older chart, only those its pod templates (the one it ran, the one kept) name.
      if (!(await this.removeLabelledSecrets(botId))) {
        for (const secret of new Set([`${name}-token`, pullSecretOf(name), ...ownPullSecrets(deployment, pullSecretOf(name))])) {
          await this.core.deleteNamespacedSecret({ name: secret, namespace }, withDeadline()).catch((err: unknown) => {
            if (apiStatus(err) !== 404) throw err;
          });
        }
      }
      // The claim is in use until the pod is gone: the cluster removes it then (its protection finalizer).
      if (dataFolders.length > 0 && options.keepData !== true) await removeClaim(this.core, namespace, claimNameOf(name));
      return { dataFolders };
    } catch (err) {
      throw translateKubeError(err, botId, failedTo('remove', botId));
    }
  }

  /**
   * Every Secret labelled with the bot, in one collection delete (the agent may not list Secrets); false when a
   * Role of a chart before this one lacks `deletecollection`.
   */
  private async removeLabelledSecrets(botId: string): Promise<boolean> {
    return this.core.deleteCollectionNamespacedSecret({ namespace: this.options.namespace, labelSelector: `${BOT_LABEL}=${botId}` }, withDeadline()).then(
      () => true,
      (err: unknown) => (apiStatus(err) === 403 ? false : Promise.reject(err)),
    );
  }

  /** Secrets a failed create made; what is not there any more is no failure. */
  private async removeSecrets(names: readonly string[]): Promise<void> {
    for (const secret of names) {
      await this.core.deleteNamespacedSecret({ name: secret, namespace: this.options.namespace }, withDeadline()).catch(() => undefined);
    }
  }

  private async deployments(botId: string | undefined): Promise<V1Deployment[]> {
    const labelSelector = botId === undefined ? BOT_LABEL : `${BOT_LABEL}=${botId}`;
    return (await this.apps.listNamespacedDeployment({ namespace: this.options.namespace, labelSelector }, withDeadline())).items;
  }

  private deploymentFor(spec: BotSpec, name: string): V1Deployment {
    const labels = { [BOT_LABEL]: spec.id, [TEMPLATE_LABEL]: spec.template };
    const data = dataMounts(claimNameOf(name), spec.data ?? []);
    const plain: V1EnvVar[] = Object.entries(botEnvironment(spec, this.options.agentUrl)).map(([key, value]) => ({ name: key, value }));
    const secret: V1EnvVar[] = TOKEN_VARIABLES.map((variable) => ({
      name: variable,
      valueFrom: { secretKeyRef: { name: `${name}-token`, key: TOKEN_KEY } },
    }));
    return {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: {
        name,
        labels,
        annotations: {
          [OWNER_LABEL]: spec.ownerId,
          ...healthPolicyLabels(spec.health ?? {}),
          ...restartPolicyLabels(spec.restartPolicy),
          // What a restore may unpack into each folder (docs/api.md §20).
          ...((spec.data ?? []).length > 0 ? { [DATA_SIZES_ANNOTATION]: JSON.stringify(Object.fromEntries((spec.data ?? []).map((folder) => [folder.path, folder.sizeMb ?? null]))) } : {}),
        },
      },
      spec: {
        replicas: 1,
        // The old pod gone before a new one starts: never two runs, nor two writers of the bot's claim.
        strategy: { type: 'Recreate' },
        selector: { matchLabels: { [BOT_LABEL]: spec.id } },
        template: {
          metadata: { labels },
          spec: {
            // A bot has no business with the cluster's API: no token of the namespace's ServiceAccount.
            automountServiceAccountToken: false,
            ...pullSecretsOf(this.options.pullSecrets ?? [], spec.registryLogin ? pullSecretOf(name) : undefined),
            // The restricted Pod Security profile.
            securityContext: {
              runAsNonRoot: true,
              runAsUser: BOT_KUBE_USER,
              runAsGroup: BOT_KUBE_USER,
              // The claim's files the bot's group's, where its storage honours fsGroup.
              ...(data.volumes.length > 0 ? { fsGroup: BOT_KUBE_USER } : {}),
              seccompProfile: { type: 'RuntimeDefault' },
            },
            // `init`: the pod's pause process is PID 1 and reaps, so a shell that runs the bot is not PID 1 and ends at SIGTERM.
            ...(spec.init === true ? { shareProcessNamespace: true } : {}),
            // The bot's name for the agent (docs/api.md §4, rule 8): a token for the audience bot-agent
            // bound to this pod, which the kubelet renews; not the namespace's ServiceAccount token.
            volumes: [
              {
                name: 'bot-agent-token',
                projected: { sources: [{ serviceAccountToken: { audience: TOKEN_AUDIENCE, expirationSeconds: 3600, path: 'token' } }] },
              },
              ...data.volumes,
            ],
            containers: [
              {
                name: 'bot',
                image: spec.image,
                command: spec.command ? [...spec.command] : undefined,
                env: [...plain, ...secret, { name: 'PLATFORM_AGENT_TOKEN_FILE', value: TOKEN_PATH }],
                volumeMounts: [{ name: 'bot-agent-token', mountPath: TOKEN_MOUNT, readOnly: true }, ...data.mounts],
                resources: botResources(spec),
                ...probesOf(spec.health),
                securityContext: { allowPrivilegeEscalation: false, privileged: false, capabilities: { drop: ['ALL'] } },
              },
            ],
          },
        },
      },
    };
  }
}

/** A bot's Deployment and the pods of the bots, as the platform's listing shows the bot. */
export function summaryOf(deployment: V1Deployment, pods: V1Pod[]): BotSummary {
  const botId = deployment.metadata?.labels?.[BOT_LABEL] ?? '';
  const running = pods.find(
    (pod) => pod.metadata?.labels?.[BOT_LABEL] === botId && pod.status?.phase === 'Running' && !pod.metadata?.deletionTimestamp,
  );
  const startedAt = running?.status?.containerStatuses?.[0]?.state?.running?.startedAt;
  return {
    bot_id: botId,
    user_id: deployment.metadata?.annotations?.[OWNER_LABEL],
    template: deployment.metadata?.labels?.[TEMPLATE_LABEL],
    state: running ? 'running' : 'stopped',
    started_at: startedAt === undefined ? undefined : new Date(startedAt).toISOString(),
    image: deployment.spec?.template.spec?.containers[0]?.image,
    revision: revisionOf(deployment.spec?.template),
  };
}

/** The bot's own pull Secrets (`own`, and those of its revisions) its pod template and the template kept to go back to name. */
function ownPullSecrets(deployment: V1Deployment, own: string): string[] {
  const templates = [deployment.spec?.template, keptTemplate(deployment)];
  return templates.flatMap((template) => (template?.spec?.imagePullSecrets ?? []).map((secret) => secret.name ?? '').filter((name) => name.startsWith(own)));
}

/** Provisioning on Kubernetes, in the bots' namespace. */
export function createKubernetesProvisioner(options: KubernetesProvisionerOptions): Provisioner {
  return new KubernetesProvisioner(options);
}

/** What a bot asks of its node when the platform names no limit: the scheduler counts it, and eviction ranks it. */
const DEFAULT_REQUESTS = { cpuMillis: 50, memoryBytes: 64 * 1024 * 1024 };
/** The node's disk a bot may fill (its writable layer, its logs, emptyDirs): past it, the kubelet evicts the pod, not the node's other pods. */
export const BOT_EPHEMERAL_STORAGE = '1Gi';

/**
 * A provisioned bot's resources: the limits the platform asked for, requests
 * that never exceed them (so that a bot without limits is still scheduled by
 * what it uses, not as free), and always a bound on the node's disk.
 */
export function botResources(spec: Pick<BotSpec, 'memoryLimitBytes' | 'cpuLimit'>): V1ResourceRequirements {
  const cpuLimitMillis = spec.cpuLimit === undefined ? undefined : Math.max(1, Math.round(spec.cpuLimit * 1000));
  const limits: Record<string, string> = { 'ephemeral-storage': BOT_EPHEMERAL_STORAGE };
  if (spec.memoryLimitBytes !== undefined) limits.memory = String(spec.memoryLimitBytes);
  if (cpuLimitMillis !== undefined) limits.cpu = `${cpuLimitMillis}m`;
  const requests = {
    cpu: `${Math.min(DEFAULT_REQUESTS.cpuMillis, cpuLimitMillis ?? Infinity)}m`,
    memory: String(Math.min(DEFAULT_REQUESTS.memoryBytes, spec.memoryLimitBytes ?? Infinity)),
    'ephemeral-storage': '64Mi',
  };
  return { requests, limits };
}

/**
 * A create's exec check as the kubelet runs it (docs/api.md §13): a liveness probe, which restarts the
 * container, and the same command as a readiness probe, whose verdict the agent reads as the bot's health.
 */
function probesOf(health: BotHealthSpec | undefined): Pick<V1Container, 'livenessProbe' | 'readinessProbe'> {
  if (health?.exec === undefined) return {};
  const probe: V1Probe = {
    exec: { command: [...health.exec] },
    periodSeconds: health.intervalS,
    timeoutSeconds: health.timeoutS,
    failureThreshold: health.retries,
    initialDelaySeconds: health.startPeriodS,
  };
  return { livenessProbe: probe, readinessProbe: { ...probe } };
}

/** The pod's imagePullSecrets: the configured ones, and the create's own login's; none: the field is left out. */
function pullSecretsOf(configured: readonly string[], own: string | undefined): Pick<V1PodSpec, 'imagePullSecrets'> {
  const names = own === undefined ? configured : [...configured, own];
  return names.length === 0 ? {} : { imagePullSecrets: names.map((secret) => ({ name: secret })) };
}
