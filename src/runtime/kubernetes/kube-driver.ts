import { execInPod } from './kube-exec.js';
import type { CommandBounds, CommandResult } from '../command-output.js';
import { AppsV1Api, CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { CoreV1Event, KubeConfig, V1Deployment, V1Pod } from '@kubernetes/client-node';
import { LRUCache } from 'lru-cache';
import { withDeadline } from './kube-deadline.js';
import type { CallOptions } from './kube-deadline.js';
import { AgentError, messages, NotFound, NotRunning, OperationFailed, RuntimeUnavailable } from '../../errors.js';
import type { BotSummary } from '../../provisioning/bot-spec.js';
import { TOKEN_VARIABLES } from '../../provisioning/bot-spec.js';
import type { BotInfo, BotStats, FaultReporter, LogLine, LogsFrom, LogWindow, PowerOutcome, RunningHealth, RunObserver, RuntimeDriver } from '../driver.js';
import { healthPolicyOf } from '../health-policy.js';
import { dataFoldersOf } from './kube-data.js';
import { podHealth } from './kube-health.js';
import { lastProbeFailure, livenessKill } from './kube-probe-events.js';
import { podEventsOf } from './kube-pull-state.js';
import { BOT_ID_PATTERN, BOT_LABEL, OWNER_LABEL } from '../labels.js';
import { apiStatus, translateKubeError } from './kube-errors.js';
import { followPodLogs, readPodLogs } from './kube-logs.js';
import { KubeRunWatcher } from './kube-runs.js';
import { dropUnreadOfPod, KubeObjectCache, LIST_PAGE, LIST_PAGE_DEADLINE_MS } from './kube-object-cache.js';
import { summaryOf } from './kube-provisioner.js';
import { botStatsFromMetrics, nodeAllocatable, podLimits } from './kube-stats.js';
import type { Capacity, PodMetrics } from './kube-stats.js';

const RESTARTED_AT = 'kubectl.kubernetes.io/restartedAt';
const DEFAULT_CONTAINER = 'kubectl.kubernetes.io/default-container';
const mergePatch = (): CallOptions => withDeadline(setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
/** How often a rollout or scale-down is checked on. */
const POLL_MS = 200;
/** Kubernetes' defaults, for objects that leave them unset. */
const DEFAULT_PROGRESS_DEADLINE_S = 600;
const DEFAULT_GRACE_S = 30;
/** metrics-server takes a sample every 15 s: a pod's metrics are asked for again at most this often. */
const METRICS_FRESH_MS = 10_000;
/** What metrics.k8s.io said of a pod it has no metrics for. */
const NO_METRICS = Symbol('no metrics');
/** How long a pod's events, read for an unhealthy bot's status, are used again. */
const EVENTS_FRESH_MS = 2_000;
/** A node's allocatable CPU and memory change only when the node is reconfigured. */
const NODE_FRESH_MS = 60_000;
/** How long a call from an address no watched pod holds waits for the watch to learn it (a pod that just started). */
const NEW_POD_GRACE_MS = 2_000;
/** ... and for how long after, further calls from that address wait no more (a stranger costs no more than one wait). */
const UNKNOWN_ADDRESS_MS = 5_000;

export interface KubernetesDriverOptions {
  readonly kubeConfig: KubeConfig;
  readonly namespace: string;
  /** Where faults of the driver's own watches go. */
  readonly report?: FaultReporter | undefined;
  /** Objects a page of the watches' lists asks for (LIST_PAGE); tests make it small to see many pages. */
  readonly listPage?: number | undefined;
  /** How long one page of those lists may take (LIST_PAGE_DEADLINE_MS); tests shorten it. */
  readonly listPageDeadlineMs?: number | undefined;
}

/** What the driver worked out of one bot from the copies (docs/performance.md, "Kubernetes at 5,000 bots"). */
interface WorkedOut {
  health?: RunningHealth | null;
  summaries?: readonly BotSummary[];
  running?: boolean;
}

/**
 * A bot is the Deployment (replicas 1) labelled with its id, and that
 * Deployment's pod. Bot ids hold underscores, which object names cannot, so
 * bots are always found by label.
 */
class KubernetesDriver implements RuntimeDriver {
  readonly runtime = 'kubernetes';
  private readonly apps: AppsV1Api;
  private readonly core: CoreV1Api;
  private readonly custom: CustomObjectsApi;
  private readonly namespace: string;
  private readonly kubeConfig: KubeConfig;
  private readonly report: FaultReporter;
  /** The bots' Deployments and pods, watched: look-ups, identities and waits read them, not the API server. */
  private readonly deployments: KubeObjectCache<V1Deployment>;
  private readonly watchedPods: KubeObjectCache<V1Pod>;
  /** Pods' metrics as lately read, and pods metrics.k8s.io had none for (a 404 is not asked again within the freshness). */
  private readonly metrics: LRUCache<string, PodMetrics | typeof NO_METRICS>;
  /** Pods' events as lately read: a status read of an unhealthy bot in a loop asks the API server once a while. */
  private readonly events: LRUCache<string, CoreV1Event[]>;
  private readonly unknownAddresses: LRUCache<string, Promise<void>>;
  private readonly nodes: LRUCache<string, Capacity>;
  /**
   * What was worked out of each bot, until its Deployment or a pod of it changes: its health (null: no pod of it
   * runs), which the watchdog asks for every bot's each second; its summaries, which the node's beacon lists every
   * 5 s (made again for all 5,000 bots each time, they were the largest share of the agents' own work through a
   * crash burst); whether a pod of it runs (docs/performance.md, "Kubernetes at 5,000 bots").
   */
  private readonly workedOut = new Map<string, WorkedOut>();
  /** The bots as last listed, and the copies' change counts they were listed at. */
  private listed: { changes: string; bots: readonly BotSummary[] } | undefined;
  /** The bots with a running pod as last listed (the log history's sweep asks each few seconds). */
  private running: { changes: string; bots: string[] } | undefined;
  private health: { changes: string; entries: readonly RunningHealth[]; starting: boolean } | undefined;

  constructor({ kubeConfig, namespace, report, listPage = LIST_PAGE, listPageDeadlineMs = LIST_PAGE_DEADLINE_MS }: KubernetesDriverOptions) {
    this.report = report ?? (() => {});
    this.kubeConfig = kubeConfig;
    this.apps = kubeConfig.makeApiClient(AppsV1Api);
    this.core = kubeConfig.makeApiClient(CoreV1Api);
    this.custom = kubeConfig.makeApiClient(CustomObjectsApi);
    this.namespace = namespace;
    const botOf = (object: V1Deployment | V1Pod): string | undefined => object.metadata?.labels?.[BOT_LABEL];
    this.deployments = new KubeObjectCache(
      kubeConfig,
      `/apis/apps/v1/namespaces/${namespace}/deployments`,
      (from) => this.apps.listNamespacedDeployment({ namespace, labelSelector: BOT_LABEL, limit: listPage, _continue: from }, withDeadline({}, listPageDeadlineMs)),
      BOT_LABEL,
      { bot: botOf },
      "the bots' Deployments",
      this.report,
    );
    this.watchedPods = new KubeObjectCache(
      kubeConfig,
      `/api/v1/namespaces/${namespace}/pods`,
      (from) => this.core.listNamespacedPod({ namespace, labelSelector: BOT_LABEL, limit: listPage, _continue: from }, withDeadline({}, listPageDeadlineMs)),
      BOT_LABEL,
      { bot: botOf, address: (pod) => pod.status?.podIP, awaiting: (pod) => (awaitsAddress(pod) ? 'address' : undefined) },
      "the bots' pods",
      this.report,
      dropUnreadOfPod,
    );
    // Concurrent reads of one pod's metrics, or one node's capacity, make one request.
    this.unknownAddresses = new LRUCache({ max: 10_000, ttl: UNKNOWN_ADDRESS_MS });
    this.metrics = new LRUCache({ max: 10_000, ttl: METRICS_FRESH_MS, fetchMethod: (pod) => this.readPodMetrics(pod) });
    this.events = new LRUCache({ max: 1_000, ttl: EVENTS_FRESH_MS, fetchMethod: (pod) => this.readPodEvents(pod) });
    this.nodes = new LRUCache({ max: 1_000, ttl: NODE_FRESH_MS, fetchMethod: (node) => this.readNodeCapacity(node) });
    const forgetWorkedOut = (object: V1Deployment | V1Pod): void => {
      const botId = botOf(object);
      if (botId === undefined) return;
      this.workedOut.delete(botId);
    };
    for (const verb of ['add', 'update', 'delete'] as const) {
      this.deployments.on(verb, forgetWorkedOut);
      this.watchedPods.on(verb, forgetWorkedOut);
    }
    this.deployments.start();
    this.watchedPods.start();
  }

  /** The API server answers, and the first sync of the watches of the bots' Deployments and pods is over (readiness). */
  async ping(): Promise<void> {
    await this.api(undefined, (options) => this.apps.listNamespacedDeployment({ namespace: this.namespace, limit: 1 }, options));
    if (!this.deployments.synced || !this.watchedPods.synced) {
      throw new RuntimeUnavailable(`${messages.runtimeUnavailable('kubernetes')}: the watches of the bots' Deployments and pods are not synced yet`);
    }
  }

  indexedBots(): number {
    return this.deployments.count('bot');
  }

  holdsBot(botId: string): boolean | undefined {
    const held = this.deployments.byIndex('bot', botId);
    return held === undefined ? undefined : held.length > 0;
  }

  /** Every bot's Deployment as the watch holds it; undefined until its first list is in. */
  watchedDeployments(): V1Deployment[] | undefined {
    return this.deployments.keysOf('bot')?.flatMap((botId) => this.deployments.byIndex('bot', botId) ?? []);
  }

  listedBots(): readonly BotSummary[] | undefined {
    if (!this.deployments.answering || !this.watchedPods.answering) return undefined;
    // The same list until a Deployment or pod changes: asked for every 5 s by the node's beacon, and by the console.
    const changes = this.copiesChanged();
    if (this.listed?.changes === changes) return this.listed.bots;
    // Each Deployment with its own bot's pods, from the index: not every pod for every bot; worked out again only
    // for the bots that changed.
    const bots = (this.deployments.keysOf('bot') ?? []).flatMap((botId) => {
      const known = this.workedOutOf(botId);
      known.summaries ??= (this.deployments.byIndex('bot', botId) ?? []).map((deployment) => summaryOf(deployment, this.watchedPods.byIndex('bot', botId) ?? []));
      return known.summaries;
    });
    this.listed = { changes, bots };
    return bots;
  }

  runningBots(): string[] {
    const changes = this.copiesChanged();
    if (this.running?.changes !== changes) {
      const runs = (botId: string): boolean => {
        const known = this.workedOutOf(botId);
        known.running ??= this.watchedPods.byIndex('bot', botId)?.some(isRunning) ?? false;
        return known.running;
      };
      this.running = { changes, bots: this.watchedPods.answering ? (this.watchedPods.keysOf('bot') ?? []).filter(runs) : [] };
    }
    return [...this.running.bots];
  }

  /** The kubelet restarts a container whose liveness probe fails: the watchdog acts on heartbeats only. */
  readonly restartsUnhealthy = true;

  runningHealth(): readonly RunningHealth[] {
    if (!this.deployments.answering || !this.watchedPods.answering) return [];
    // The same entries while nothing changed and none is `starting`, which may turn `unhealthy` with time alone
    // (podHealth): the watchdog looks every second.
    const changes = this.copiesChanged();
    if (this.health?.changes === changes && !this.health.starting) return this.health.entries;
    const entries: RunningHealth[] = [];
    let starting = false;
    for (const botId of this.deployments.keysOf('bot') ?? []) {
      const worked = this.workedOutOf(botId);
      if (worked.health === undefined || worked.health?.status === 'starting') worked.health = this.workOutHealth(botId);
      const known = worked.health;
      if (known) entries.push(known);
      starting ||= known?.status === 'starting';
    }
    this.health = { changes, entries, starting };
    return entries;
  }

  private workedOutOf(botId: string): WorkedOut {
    let known = this.workedOut.get(botId);
    if (known === undefined) this.workedOut.set(botId, (known = {}));
    return known;
  }

  /** A mark of the two copies' state: the same mark, the same Deployments and pods. */
  private copiesChanged(): string {
    // Whether each copy answers too: one that comes back with nothing changed answers what it held.
    return `${this.deployments.changes}:${this.watchedPods.changes}:${this.deployments.answering}:${this.watchedPods.answering}`;
  }

  private workOutHealth(botId: string): RunningHealth | null {
    const deployment = this.deployments.byIndex('bot', botId)?.[0];
    const pod = this.watchedRunningPod(botId);
    if (!deployment || !pod) return null;
    const startedAtMs = runStartOf(pod).getTime();
    const { status, sinceMs } = podHealth(pod, defaultContainer(pod), startedAtMs);
    return { botId, startedAtMs, status, sinceMs, policy: healthPolicyOf(deployment.metadata?.annotations), createdAtMs: createdAtOf(deployment)?.getTime() };
  }

  async findBot(botId: string): Promise<BotInfo> {
    const deployment = await this.knownDeployment(botId);
    const pod = desiredReplicas(deployment) > 0 ? await this.runningPod(botId) : undefined;
    const startedAt = pod && runStartOf(pod);
    const status = pod && startedAt ? podHealth(pod, defaultContainer(pod), startedAt.getTime()).status : 'none';
    // What the probe said is in the pod's events: read only for a bot whose probe fails.
    const output = status === 'unhealthy' && pod?.metadata?.name ? lastProbeFailure(await this.podEvents(pod.metadata.name)) : null;
    return {
      id: botId,
      ownerId: deployment.metadata?.annotations?.[OWNER_LABEL],
      running: pod !== undefined,
      startedAt,
      health: { status, output },
      healthPolicy: healthPolicyOf(deployment.metadata?.annotations),
      createdAt: createdAtOf(deployment),
      dataFolders: dataFoldersOf(deployment.spec?.template),
    };
  }

  observeRuns(observer: RunObserver): void {
    const runs = new KubeRunWatcher(
      observer,
      (pod, container, previous, lines) =>
        readPodLogs(this.core, this.kubeConfig, { namespace: this.namespace, pod, container, previous }, lines),
      defaultContainer,
      this.report,
      // Read afresh: the kubelet's word on a kill comes just before the end it explains.
      async (pod, startedMs, endedMs) => livenessKill(await this.readPodEvents(pod), startedMs, endedMs),
    );
    runs.watch(this.watchedPods);
  }

  async followLogs(botId: string, from: LogsFrom, onLine: (line: LogLine) => void, signal: AbortSignal): Promise<void> {
    const deployment = await this.knownDeployment(botId);
    const pod = desiredReplicas(deployment) > 0 ? ((await this.runningPod(botId)) ?? newest(await this.pods(botId))) : undefined;
    if (!pod) return;
    try {
      await followPodLogs(this.kubeConfig, { namespace: this.namespace, pod: nameOf(pod), container: defaultContainer(pod), previous: false }, from, onLine, signal);
    } catch (err) {
      throw translateKubeError(err, botId);
    }
  }

  async botAtAddress(address: string): Promise<string | undefined> {
    let watched = this.watchedPods.byIndex('address', address);
    if (watched?.length === 0 && this.podsAwaitAddress()) {
      // A pod may call before the kubelet has reported its address: while a bot's pod has none yet, wait a little
      // for the watch to learn it, once per address however many calls come (a stranger's next calls within seconds
      // wait no more). With every pod's address known, an address none holds is no bot's: no wait.
      let learning = this.unknownAddresses.get(address);
      if (!learning) {
        learning = this.learnAddress(address);
        this.unknownAddresses.set(address, learning);
      }
      await learning;
      watched = this.watchedPods.byIndex('address', address);
    }
    if (watched) return botHolding(watched, address);
    const pods = await this.api(undefined, (options) =>
      this.core.listNamespacedPod({ namespace: this.namespace, labelSelector: BOT_LABEL, fieldSelector: `status.podIP=${address}` }, options),
    );
    return botHolding(pods.items, address);
  }

  private podsAwaitAddress(): boolean {
    return (this.watchedPods.byIndex('awaiting', 'address')?.length ?? 0) > 0;
  }

  /** Resolves once the watch holds a pod at `address`, or no pod awaits its address any more, or NEW_POD_GRACE_MS later. */
  private async learnAddress(address: string): Promise<void> {
    const deadline = Date.now() + NEW_POD_GRACE_MS;
    while (this.watchedPods.byIndex('address', address)?.length === 0 && this.podsAwaitAddress() && Date.now() < deadline) {
      await this.watchedPods.nextChange(deadline - Date.now());
    }
  }

  async restart(botId: string, unfinishedSince?: Date): Promise<void> {
    const failed = (detail: string): AgentError => new OperationFailed(messages.restartFailed(botId, detail));
    const deployment = await this.deployment(botId);
    if (unfinishedSince && rolledOutSince(deployment, unfinishedSince)) {
      await this.awaitRollout(botId, deployment, failed);
      return;
    }
    if (desiredReplicas(deployment) === 0 || !(await this.runningPod(botId))) {
      throw new NotRunning(messages.notRunning(botId));
    }
    if (deployment.spec?.paused) throw failed('its Deployment is paused, so it cannot be rolled out');
    // What `kubectl rollout restart` does; milliseconds, so that two restarts within a second still differ.
    const patched = await this.api(
      botId,
      () =>
        this.apps.patchNamespacedDeployment(
          {
            name: nameOf(deployment),
            namespace: this.namespace,
            body: { spec: { template: { metadata: { annotations: { [RESTARTED_AT]: new Date().toISOString() } } } } },
          },
          mergePatch(),
        ),
      failed,
    );
    await this.awaitRollout(botId, patched, failed);
  }

  async stop(botId: string): Promise<PowerOutcome> {
    const deployment = await this.deployment(botId);
    if (desiredReplicas(deployment) === 0) return 'already';
    await this.scale(botId, deployment, 0);
    // The pod gets its own grace period; stop returns once it is gone, as `docker stop` does.
    const graceS = deployment.spec?.template?.spec?.terminationGracePeriodSeconds ?? DEFAULT_GRACE_S;
    const gone = await this.poll(graceS + 30, async () => (await this.pods(botId)).length === 0);
    if (!gone) throw new OperationFailed(`Failed to stop bot ${botId}: its pod was still there after ${graceS + 30} s`);
    return 'done';
  }

  async start(botId: string): Promise<PowerOutcome> {
    const deployment = await this.deployment(botId);
    if (desiredReplicas(deployment) > 0) return 'already';
    const scaled = await this.scale(botId, deployment, 1);
    await this.awaitRollout(botId, scaled, (detail) => new OperationFailed(`Failed to start bot ${botId}: ${detail}`));
    return 'done';
  }

  async logs(botId: string, lines: number, window: LogWindow = {}): Promise<string> {
    await this.knownDeployment(botId);
    // Scaling to 0 deletes the pod and its logs with it: a stopped bot has none to show.
    const pod = (await this.runningPod(botId)) ?? newest(await this.pods(botId));
    if (!pod) return '';
    const container = defaultContainer(pod);
    // Not `previous`: the kubelet answers a container that ended, or that waits to start
    // again, with its last run; `previous` is the run before that, which it may have removed.
    return this.api(botId, () =>
      readPodLogs(this.core, this.kubeConfig, { namespace: this.namespace, pod: nameOf(pod), container, previous: false }, lines, window),
    );
  }

  /**
   * The bot's token under each of its names, as its Deployment gives them: a plain value, or the key of a Secret
   * it reads through secretKeyRef, where the agent may read that Secret (provisioning on: the chart's Role). Its
   * PLATFORM_AGENT_TOKEN is a projected token the kubelet renews, which the log history masks by its shape.
   */
  async botSecrets(botId: string): Promise<string[]> {
    const named = new Set<string>([...TOKEN_VARIABLES, 'PLATFORM_AGENT_TOKEN']);
    const env = (await this.knownDeployment(botId)).spec?.template.spec?.containers.flatMap((container) => container.env ?? []) ?? [];
    const secrets: string[] = [];
    for (const variable of env.filter(({ name }) => named.has(name))) {
      if (variable.value !== undefined) secrets.push(variable.value);
      const ref = variable.valueFrom?.secretKeyRef;
      if (ref?.name === undefined) continue;
      // Not allowed (no provisioning), or gone: that value is not known, and so not masked.
      const secret = await this.core.readNamespacedSecret({ name: ref.name, namespace: this.namespace }, withDeadline()).catch(() => undefined);
      const value = secret?.data?.[ref.key];
      if (value !== undefined) secrets.push(Buffer.from(value, 'base64').toString('utf8'));
    }
    return secrets;
  }

  async exec(botId: string, argv: readonly string[], bounds: CommandBounds): Promise<CommandResult> {
    await this.knownDeployment(botId);
    const pod = await this.runningPod(botId);
    if (!pod) throw new NotRunning(messages.notRunning(botId));
    const container = defaultContainer(pod) ?? pod.spec?.containers[0]?.name ?? '';
    return this.api(botId, () => execInPod(this.kubeConfig, { namespace: this.namespace, pod: nameOf(pod), container }, argv, bounds));
  }

  async stats(botId: string): Promise<BotStats> {
    await this.knownDeployment(botId);
    const pod = await this.runningPod(botId);
    if (!pod) throw new NotRunning(messages.notRunning(botId));
    const [metrics, capacity] = await Promise.all([this.metrics.fetch(nameOf(pod)), this.capacity(pod)]);
    if (metrics === NO_METRICS || metrics === undefined) {
      throw new RuntimeUnavailable(
        `${messages.runtimeUnavailable('kubernetes')}: no metrics for the bot's pod from metrics.k8s.io ` +
          '(is metrics-server installed? a new pod has none for its first minute)',
      );
    }
    return botStatsFromMetrics(metrics, capacity, runStartOf(pod));
  }

  /**
   * Every pod's metrics in the namespace in one list, kept as each pod's own read would keep them (one the list
   * lacks has none now, as a read's 404 would say): a round of the console's samples over 5,000 bots asks once,
   * not 5,000 times, and makes no error for each bot without metrics (docs/performance.md). Not by label: a
   * metrics API need not copy the pods' labels. A cluster without metrics-server answers the list 404, as it
   * would each pod's read: no pod has metrics, and none is asked.
   */
  async statsRound(): Promise<ReadonlyMap<string, BotStats>> {
    const list = (await this.custom
      .listNamespacedCustomObject({ group: 'metrics.k8s.io', version: 'v1beta1', namespace: this.namespace, plural: 'pods' }, withDeadline())
      .catch((err: unknown) => {
        if (apiStatus(err) === 404) return { items: [] };
        throw translateKubeError(err, undefined);
      })) as { items?: PodMetrics[] };
    const listed = new Map((list.items ?? []).map((item) => [item.metadata?.name ?? '', item]));
    const round = new Map<string, BotStats>();
    for (const botId of this.watchedPods.keysOf('bot') ?? []) {
      const pod = this.watchedRunningPod(botId);
      if (!pod) continue;
      const metrics = listed.get(nameOf(pod));
      this.metrics.set(nameOf(pod), metrics ?? NO_METRICS);
      if (metrics) round.set(botId, botStatsFromMetrics(metrics, await this.capacity(pod), runStartOf(pod)));
    }
    return round;
  }

  async close(): Promise<void> {
    this.deployments.close();
    this.watchedPods.close();
  }

  /** The bot's Deployment as the watch has it; asked of the API server while the watch is not open, or for a bot it has not seen yet. */
  private async knownDeployment(botId: string): Promise<V1Deployment> {
    return this.deployments.byIndex('bot', botId)?.[0] ?? this.deployment(botId);
  }

  /** The bot's Deployment as the API server has it now, for operations that change it. */
  private async deployment(botId: string): Promise<V1Deployment> {
    const list = await this.api(botId, (options) =>
      this.apps.listNamespacedDeployment({ namespace: this.namespace, labelSelector: `${BOT_LABEL}=${botId}` }, options),
    );
    const deployment = list.items[0];
    if (!deployment) throw new NotFound(messages.botNotFound(botId));
    return deployment;
  }

  private async pods(botId: string): Promise<V1Pod[]> {
    const watched = this.watchedPods.byIndex('bot', botId);
    if (watched) return watched;
    const list = await this.api(botId, (options) =>
      this.core.listNamespacedPod({ namespace: this.namespace, labelSelector: `${BOT_LABEL}=${botId}` }, options),
    );
    return list.items;
  }

  /** The bot's newest pod that runs and is not being deleted. */
  private async runningPod(botId: string): Promise<V1Pod | undefined> {
    return newest((await this.pods(botId)).filter(isRunning));
  }

  /** runningPod from the watch's copy alone, never asking the API server: for looks over every bot. */
  private watchedRunningPod(botId: string): V1Pod | undefined {
    return newest((this.watchedPods.byIndex('bot', botId) ?? []).filter(isRunning));
  }

  private async scale(botId: string, deployment: V1Deployment, replicas: number): Promise<V1Deployment> {
    await this.api(botId, () =>
      this.apps.patchNamespacedDeploymentScale(
        { name: nameOf(deployment), namespace: this.namespace, body: { spec: { replicas } } },
        mergePatch(),
      ),
    );
    return this.deployment(botId);
  }

  /** Waits as `kubectl rollout status` does, within the Deployment's progress deadline. */
  private async awaitRollout(botId: string, deployment: V1Deployment, failed: (detail: string) => AgentError) {
    const generation = deployment.metadata?.generation ?? 0;
    const deadlineS = deployment.spec?.progressDeadlineSeconds ?? DEFAULT_PROGRESS_DEADLINE_S;
    const done = await this.poll(deadlineS, async () => rolledOut(await this.knownDeployment(botId), generation));
    if (!done) throw failed(`the rollout did not complete within ${deadlineS} s`);
  }

  /** Checks `check` at each change the watches see (at least every POLL_MS) for up to `seconds`; answers whether it came true. */
  private async poll(seconds: number, check: () => Promise<boolean>): Promise<boolean> {
    const deadline = Date.now() + seconds * 1000;
    while (Date.now() < deadline) {
      if (await check()) return true;
      await Promise.race([this.deployments.nextChange(POLL_MS), this.watchedPods.nextChange(POLL_MS)]);
    }
    return check();
  }

  private async readPodMetrics(pod: string): Promise<PodMetrics | typeof NO_METRICS> {
    try {
      return (await this.custom.getNamespacedCustomObject(
        { group: 'metrics.k8s.io', version: 'v1beta1', namespace: this.namespace, plural: 'pods', name: pod },
        withDeadline(),
      )) as PodMetrics;
    } catch (err) {
      if (apiStatus(err) !== 404) throw translateKubeError(err, undefined);
      return NO_METRICS;
    }
  }

  /** The pod's limits, else what its node offers. */
  private async capacity(pod: V1Pod): Promise<Capacity> {
    const limits = podLimits(pod);
    const nodeName = pod.spec?.nodeName;
    // What the pod has no limit of is taken against the node's allocatable.
    const node = limits.cpuCores !== undefined && limits.memoryBytes !== undefined ? undefined : nodeName ? await this.nodes.fetch(nodeName) : undefined;
    return { cpuCores: limits.cpuCores ?? node?.cpuCores ?? 0, memoryBytes: limits.memoryBytes ?? node?.memoryBytes ?? 0 };
  }

  private async readNodeCapacity(node: string): Promise<Capacity> {
    return nodeAllocatable(await this.api(undefined, (options) => this.core.readNode({ name: node }, options)));
  }

  /** A pod's events (the kubelet's word on its probes); none when they cannot be read (the Role lacks `events list`, a deadline). */
  private async podEvents(pod: string): Promise<CoreV1Event[]> {
    return (await this.events.fetch(pod)) ?? [];
  }

  private async readPodEvents(pod: string): Promise<CoreV1Event[]> {
    try {
      return await this.api(undefined, () => podEventsOf(this.core, this.namespace, [pod]));
    } catch (err) {
      this.report('the events of a bot pod could not be read (its probes say nothing here)', err);
      return [];
    }
  }

  /** One API server call under a deadline, its failure translated at this edge. */
  private async api<T>(
    botId: string | undefined,
    call: (options: CallOptions) => Promise<T>,
    failed?: (detail: string) => AgentError,
  ): Promise<T> {
    try {
      return await call(withDeadline());
    } catch (err) {
      throw translateKubeError(err, botId, failed);
    }
  }
}

/**
 * True when the Deployment's pods were last restarted at or after `since` (to the millisecond,
 * as restart stamps them): a rollout the agent that began a restart then had already asked for.
 */
function rolledOutSince(deployment: V1Deployment, since: Date): boolean {
  const stamp = Date.parse(deployment.spec?.template?.metadata?.annotations?.[RESTARTED_AT] ?? '');
  return Number.isFinite(stamp) && stamp >= since.getTime();
}

/** A pod placed on a node and starting or running, whose address the kubelet has not reported yet. */
function awaitsAddress(pod: V1Pod): boolean {
  const phase = pod.status?.phase;
  return !pod.status?.podIP && !!pod.spec?.nodeName && !pod.metadata?.deletionTimestamp && (phase === undefined || phase === 'Pending' || phase === 'Running');
}

function desiredReplicas(deployment: V1Deployment): number {
  return deployment.spec?.replicas ?? 1;
}

function nameOf(object: { metadata?: { name?: string } }): string {
  return object.metadata?.name ?? '';
}

/** A pod that runs and is not being deleted. */
function isRunning(pod: V1Pod): boolean {
  return pod.status?.phase === 'Running' && !pod.metadata?.deletionTimestamp;
}

function newest(pods: V1Pod[]): V1Pod | undefined {
  const time = (pod: V1Pod): number => new Date(pod.metadata?.creationTimestamp ?? 0).getTime();
  return pods.reduce<V1Pod | undefined>((best, pod) => (!best || time(pod) > time(best) ? pod : best), undefined);
}

/** When the bot's container in `pod` last started. */
function runStartOf(pod: V1Pod): Date {
  const container = defaultContainer(pod);
  const status = pod.status?.containerStatuses?.find((s) => s.name === container);
  return new Date(status?.state?.running?.startedAt ?? pod.status?.startTime ?? Date.now());
}

function defaultContainer(pod: V1Pod): string | undefined {
  return pod.metadata?.annotations?.[DEFAULT_CONTAINER] ?? pod.spec?.containers?.[0]?.name;
}

/** A rollout is complete when every wanted replica is updated and available, and no old one is left. */
function rolledOut(deployment: V1Deployment, generation: number): boolean {
  const wanted = desiredReplicas(deployment);
  const status = deployment.status ?? {};
  return (
    (status.observedGeneration ?? 0) >= generation &&
    (status.updatedReplicas ?? 0) === wanted &&
    (status.replicas ?? 0) === wanted &&
    (status.availableReplicas ?? 0) === wanted
  );
}

/**
 * The bot whose pod holds `address` (docs/api.md §4 rule 4): exactly one running pod not being deleted
 * holds it, and no pod on the host's network (which shares the node's address with everything there).
 */
export function botHolding(pods: readonly V1Pod[], address: string): string | undefined {
  const holders = pods.filter((pod) => pod.status?.podIP === address);
  if (holders.some((pod) => pod.spec?.hostNetwork)) return undefined;
  const running = holders.filter((pod) => pod.status?.phase === 'Running' && !pod.metadata?.deletionTimestamp);
  const botId = running.length === 1 ? running[0]?.metadata?.labels?.[BOT_LABEL] : undefined;
  return botId !== undefined && BOT_ID_PATTERN.test(botId) ? botId : undefined;
}

/** The Kubernetes driver, talking to the API server `kubeConfig` names, in `namespace`. */
export function createKubernetesDriver(options: KubernetesDriverOptions): RuntimeDriver & Pick<KubernetesDriver, 'watchedDeployments'> {
  return new KubernetesDriver(options);
}

/** When the bot's Deployment was made. */
function createdAtOf(deployment: V1Deployment): Date | undefined {
  const created = deployment.metadata?.creationTimestamp;
  return created === undefined ? undefined : new Date(created);
}
