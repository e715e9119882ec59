import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:https';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { BOT_LABEL, OWNER_LABEL } from '../../../src/runtime/labels.js';
import { PatchError, jsonPatch, mergePatch } from './patch.js';
import { authorize } from './rbac.js';
import type { Grants, RequestAttributes } from './rbac.js';
import { SelectorError, matchesFields, matchesLabels } from './selectors.js';
import { selfSignedCertificate } from './tls.js';

// A test-only Kubernetes API server: the real REST paths, verbs, query
// parameters, patch content types and Status errors of what the agent calls,
// RBAC from the chart's rules, and a Deployment controller just honest enough.

// Objects as the wire carries them; the fake checks what the real server checks, not TypeScript's shapes.
type Json = any;

/** A bot as the test seeds it. */
export interface FakeBotSpec {
  id: string;
  owner?: string;
  replicas?: number;
  /** The address its pods get, so a test can call the agent from it. */
  podIP?: string;
  logLines?: string[];
  /** How long a new pod takes to be Running and Ready. */
  startDelayMs?: number;
  /** Container limits; none: stats fall back to the node's allocatable. */
  limits?: { cpu: string; memory: string };
  usage?: { cpu: string; memory: string };
  /** False: the Deployment and its pods carry no bot label. */
  labelled?: boolean;
  paused?: boolean;
}

interface FakeBot {
  spec: Required<Omit<FakeBotSpec, 'limits' | 'podIP'>> & Pick<FakeBotSpec, 'limits' | 'podIP'>;
  deployment: Json;
  pods: Json[];
  /** Pod templates rolled out after creation (restarts, not scaling). */
  rollouts: number;
}

interface Route extends RequestAttributes {
  watch: boolean;
}

const STATUS_REASON: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
};

class ApiError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly details?: Json,
  ) {
    super(message);
  }
}

const NODE = { name: 'node-1', allocatable: { cpu: '2', memory: '8Gi' } };
const timestamp = (): string => new Date().toISOString().replace(/\.\d+Z$/, 'Z');
const hashOf = (value: unknown): string => createHash('sha256').update(JSON.stringify(value)).digest('hex').slice(0, 10);

/** The fake API server; `start` it, hand `kubeConfig()` to the driver, `stop` it. */
export class FakeKubeApi {
  readonly token = randomBytes(16).toString('hex');
  /** Every request the server answered, as `VERB resource[/subresource] status`. */
  readonly requests: string[] = [];
  /** When false, metrics.k8s.io is not served, as on a cluster without metrics-server. */
  metricsServer = true;
  /** When true, a log read without limitBytes sends its first KiB and then hangs. */
  stallLogStreams = false;
  /** When true, requests are accepted and never answered, as by an API server that hangs. */
  stalled = false;
  /** When true, a watch is opened and never says anything: the agent's copies hold what their first list read. */
  silentWatches = false;
  /** While set, a watch is answered only once this settles (a watch that is slow to open). */
  holdWatches: Promise<void> | undefined;
  private readonly bots = new Map<string, FakeBot>();
  /** Secrets by name. */
  readonly secrets = new Map<string, Json>();
  private readonly tls = selfSignedCertificate();
  private server: Server | undefined;
  private nextAddress = 1;
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(
    readonly namespace: string,
    private readonly grants: Grants,
  ) {}

  async start(): Promise<void> {
    this.server = createServer({ key: this.tls.key, cert: this.tls.cert }, (req, res) => void this.handle(req, res));
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
  }

  async stop(): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer);
    this.server?.closeAllConnections();
    this.server?.close();
  }

  /** A kubeconfig for this server (HTTPS, its CA, a bearer token), as client-node loads it from its file. */
  kubeConfig(): KubeConfig {
    const config = new KubeConfig();
    config.loadFromFile(this.kubeConfigFile());
    return config;
  }

  /** Writes a kubeconfig file for this server and answers its path. */
  kubeConfigFile(): string {
    const { port } = this.server?.address() as AddressInfo;
    const file = join(tmpdir(), `fake-kubeconfig-${process.pid}-${port}.yaml`);
    writeFileSync(
      file,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [
          {
            name: 'fake',
            cluster: {
              server: `https://127.0.0.1:${port}`,
              'certificate-authority-data': Buffer.from(this.tls.cert).toString('base64'),
            },
          },
        ],
        users: [{ name: 'agent', user: { token: this.token } }],
        contexts: [{ name: 'fake', context: { cluster: 'fake', user: 'agent', namespace: this.namespace } }],
        'current-context': 'fake',
      }),
    );
    return file;
  }

  /** Seeds a bot: a Deployment of `replicas` (default 1) and its pod, Running at once. */
  addBot(spec: FakeBotSpec): void {
    const full: FakeBot['spec'] = {
      owner: 'user_1',
      replicas: 1,
      logLines: [],
      startDelayMs: 30,
      usage: { cpu: '150m', memory: '48Mi' },
      labelled: true,
      paused: false,
      ...(Object.fromEntries(Object.entries(spec).filter(([, value]) => value !== undefined)) as FakeBotSpec),
    };
    const labels = full.labelled ? { [BOT_LABEL]: spec.id } : { app: spec.id };
    const name = spec.id.replace(/_/g, '-');
    const deployment: Json = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: {
        name,
        namespace: this.namespace,
        labels,
        annotations: { [OWNER_LABEL]: full.owner },
        generation: 1,
        resourceVersion: '1',
        uid: randomBytes(8).toString('hex'),
        creationTimestamp: timestamp(),
      },
      spec: {
        replicas: full.replicas,
        paused: full.paused || undefined,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            terminationGracePeriodSeconds: 30,
            containers: [{ name: 'bot', image: 'bot:1', resources: full.limits ? { limits: full.limits } : {} }],
          },
        },
      },
      status: {},
    };
    const bot: FakeBot = { spec: full, deployment, pods: [], rollouts: 0 };
    this.bots.set(spec.id, bot);
    for (let i = 0; i < full.replicas; i++) this.markRunning(bot, this.newPod(bot));
    this.updateStatus(bot);
  }

  /** The bot's pods that are not being deleted. */
  livePods(botId: string): Json[] {
    return (this.bots.get(botId)?.pods ?? []).filter((pod) => !pod.metadata.deletionTimestamp);
  }

  /** How many times the bot's pod template was rolled out anew. */
  rollouts(botId: string): number {
    return this.bots.get(botId)?.rollouts ?? 0;
  }

  replicas(botId: string): number {
    return this.bots.get(botId)?.deployment.spec.replicas ?? 0;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (this.stalled) return;
    const url = new URL(req.url ?? '/', 'https://fake');
    let route: Route | undefined;
    try {
      if (req.headers.authorization !== `Bearer ${this.token}`) throw new ApiError(401, 'Unauthorized');
      route = routeOf(req.method ?? 'GET', url.pathname, url.searchParams);
      if (!route) throw new ApiError(404, 'the server could not find the requested resource');
      if (!authorize(this.grants, route)) throw forbidden(route, this.grants.namespace);
      // Watches are the real cluster's to serve (test/kube-cluster): here the agent's watches fail, and it asks for each look-up.
      if (route.watch) {
        await this.holdWatches;
        if (this.silentWatches) {
          this.requests.push(requestLine(route, 200));
          res.writeHead(200, { 'content-type': 'application/json' });
          res.flushHeaders();
          return;
        }
        throw new ApiError(405, 'this test-only API server does not serve watch');
      }
      const body = await readBody(req);
      const answer = this.serve(route, url.searchParams, body, req.headers['content-type']);
      this.answer(res, route, 200, answer);
    } catch (err) {
      const error =
        err instanceof ApiError
          ? err
          : err instanceof SelectorError || err instanceof PatchError
            ? new ApiError(400, err.message)
            : new ApiError(500, String(err));
      this.answer(res, route, error.code, {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: error.message,
        reason: STATUS_REASON[error.code] ?? 'InternalError',
        details: error.details,
        code: error.code,
      });
    }
  }

  private answer(res: ServerResponse, route: Route | undefined, code: number, body: Json): void {
    this.requests.push(requestLine(route, code));
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    res.writeHead(code, { 'content-type': typeof body === 'string' ? 'text/plain' : 'application/json' });
    // A log streamed in full (no limitBytes) stops half-way and hangs, as from a stalled kubelet.
    if (this.stallLogStreams && route?.subresource === 'log' && text.length > 1024 && !res.req.url?.includes('limitBytes')) {
      res.write(text.slice(0, 1024));
      return;
    }
    res.end(text);
  }

  private serve(route: Route, query: URLSearchParams, body: string, contentType: string | undefined): Json {
    if (route.namespace !== undefined && route.namespace !== this.namespace) {
      throw new ApiError(404, `namespaces "${route.namespace}" not found`);
    }
    const key = `${route.verb} ${route.apiGroup}/${route.resource}${route.subresource ? `/${route.subresource}` : ''}`;
    switch (key) {
      case 'list apps/deployments':
        return this.list('DeploymentList', 'apps/v1', [...this.bots.values()].map((b) => b.deployment), query, () => ({}));
      case 'get apps/deployments':
        return this.botNamed(route.name).deployment;
      case 'create apps/deployments':
        return this.createDeployment(JSON.parse(body));
      case 'delete apps/deployments': {
        const bot = this.botNamed(route.name);
        this.bots.delete(bot.spec.id);
        return { kind: 'Status', apiVersion: 'v1', status: 'Success', details: { name: route.name, kind: 'deployments' } };
      }
      case 'create /secrets': {
        const secret = JSON.parse(body);
        if (this.secrets.has(secret.metadata?.name)) throw new ApiError(409, `secrets "${secret.metadata.name}" already exists`);
        this.secrets.set(secret.metadata.name, { ...secret, metadata: { ...secret.metadata, namespace: this.namespace } });
        return this.secrets.get(secret.metadata.name);
      }
      case 'delete /secrets':
        if (!this.secrets.delete(route.name ?? '')) throw new ApiError(404, `secrets "${route.name}" not found`);
        return { kind: 'Status', apiVersion: 'v1', status: 'Success' };
      case 'deletecollection /secrets': {
        const gone = [...this.secrets.values()].filter((secret) => matchesLabels(query.get('labelSelector'), secret.metadata?.labels));
        for (const secret of gone) this.secrets.delete(secret.metadata.name);
        return { kind: 'SecretList', apiVersion: 'v1', metadata: {}, items: gone };
      }
      case 'patch apps/deployments':
        return this.patchDeployment(this.botNamed(route.name), patchOf(contentType, body));
      case 'get apps/deployments/scale':
        return scaleOf(this.botNamed(route.name));
      case 'patch apps/deployments/scale':
        return this.patchScale(this.botNamed(route.name), patchOf(contentType, body));
      case 'list /pods':
        return this.list('PodList', 'v1', [...this.bots.values()].flatMap((b) => b.pods), query, podFields);
      case 'get /pods':
        return this.pod(route.name);
      case 'get /pods/log':
        return this.podLog(this.pod(route.name), query);
      case 'get metrics.k8s.io/pods':
        return this.podMetrics(route.name);
      case 'list metrics.k8s.io/pods': {
        if (!this.metricsServer) throw new ApiError(404, 'the server could not find the requested resource');
        const running = [...this.bots.values()].flatMap((b) => b.pods).filter((p) => p.status.phase === 'Running');
        return { kind: 'PodMetricsList', apiVersion: 'metrics.k8s.io/v1beta1', metadata: {}, items: running.map((p) => this.podMetrics(p.metadata.name)) };
      }
      case 'get /nodes':
        if (route.name !== NODE.name) throw new ApiError(404, `nodes "${route.name}" not found`);
        return { apiVersion: 'v1', kind: 'Node', metadata: { name: NODE.name }, status: { allocatable: NODE.allocatable } };
      default:
        throw new ApiError(405, `the server does not allow this method on the requested resource (${key})`);
    }
  }

  private list(kind: string, apiVersion: string, items: Json[], query: URLSearchParams, fields: (o: Json) => Json): Json {
    const selected = items.filter(
      (item) =>
        matchesLabels(query.get('labelSelector'), item.metadata.labels) &&
        matchesFields(query.get('fieldSelector'), { 'metadata.name': item.metadata.name, 'metadata.namespace': item.metadata.namespace, ...fields(item) }),
    );
    const limit = Number(query.get('limit') ?? 0);
    return { kind, apiVersion, metadata: { resourceVersion: '1' }, items: limit > 0 ? selected.slice(0, limit) : selected };
  }

  /** A Deployment the agent creates: kept as given, then run by the controller like a seeded one. */
  private createDeployment(deployment: Json): Json {
    const name = deployment.metadata?.name;
    if ([...this.bots.values()].some((b) => b.deployment.metadata.name === name)) {
      throw new ApiError(409, `deployments.apps "${name}" already exists`);
    }
    const id = deployment.metadata?.labels?.[BOT_LABEL] ?? name;
    const bot: FakeBot = {
      spec: {
        id,
        owner: deployment.metadata?.annotations?.[OWNER_LABEL],
        replicas: deployment.spec?.replicas ?? 1,
        logLines: [],
        startDelayMs: 30,
        usage: { cpu: '10m', memory: '16Mi' },
        labelled: true,
        paused: false,
      },
      deployment: {
        ...deployment,
        metadata: { ...deployment.metadata, namespace: this.namespace, generation: 1, resourceVersion: '1', uid: randomBytes(8).toString('hex'), creationTimestamp: timestamp() },
        status: {},
      },
      pods: [],
      rollouts: 0,
    };
    this.bots.set(id, bot);
    this.reconcile(bot);
    return bot.deployment;
  }

  /** The Deployment made for or seeded as `botId`, as the server stores it. */
  deploymentOf(botId: string): Json | undefined {
    return this.bots.get(botId)?.deployment;
  }

  private botNamed(name: string | undefined): FakeBot {
    const bot = [...this.bots.values()].find((b) => b.deployment.metadata.name === name);
    if (!bot) throw new ApiError(404, `deployments.apps "${name}" not found`, { name, group: 'apps', kind: 'deployments' });
    return bot;
  }

  private pod(name: string | undefined): Json {
    const pod = [...this.bots.values()].flatMap((b) => b.pods).find((p) => p.metadata.name === name);
    if (!pod) throw new ApiError(404, `pods "${name}" not found`, { name, kind: 'pods' });
    return pod;
  }

  private patchDeployment(bot: FakeBot, patch: (target: Json) => Json): Json {
    const before = bot.deployment;
    const after = patch(structuredClone(before));
    const templateChanged = hashOf(after.spec.template) !== hashOf(before.spec.template);
    const specChanged = hashOf(after.spec) !== hashOf(before.spec);
    bot.deployment = { ...after, metadata: { ...before.metadata, ...after.metadata }, status: before.status };
    if (specChanged) this.bumpGeneration(bot);
    if (templateChanged) bot.rollouts += 1;
    if (specChanged && !after.spec.paused) this.reconcile(bot);
    return bot.deployment;
  }

  private patchScale(bot: FakeBot, patch: (target: Json) => Json): Json {
    const replicas = patch(scaleOf(bot)).spec?.replicas;
    if (!Number.isInteger(replicas) || replicas < 0) {
      throw new ApiError(422, `Scale.autoscaling "${bot.deployment.metadata.name}" is invalid: spec.replicas: Invalid value`);
    }
    if (replicas !== bot.deployment.spec.replicas) {
      bot.deployment.spec.replicas = replicas;
      this.bumpGeneration(bot);
      this.reconcile(bot);
    }
    return scaleOf(bot);
  }

  private bumpGeneration(bot: FakeBot): void {
    bot.deployment.metadata.generation += 1;
    bot.deployment.metadata.resourceVersion = String(Number(bot.deployment.metadata.resourceVersion) + 1);
  }

  /** The Deployment controller: a new pod for a new template or a missing replica; old pods go once it is Ready. */
  private reconcile(bot: FakeBot): void {
    const wanted = bot.deployment.spec.replicas;
    const template = hashOf(bot.deployment.spec.template);
    const live = bot.pods.filter((pod) => !pod.metadata.deletionTimestamp);
    const current = live.filter((pod) => pod.metadata.labels['pod-template-hash'] === template);
    const old = live.filter((pod) => pod.metadata.labels['pod-template-hash'] !== template);
    if (wanted === 0) {
      for (const pod of live) this.terminate(bot, pod);
    } else if (current.length < wanted) {
      const pod = this.newPod(bot);
      this.later(bot.spec.startDelayMs, () => {
        this.markRunning(bot, pod);
        for (const stale of old) this.terminate(bot, stale);
        this.updateStatus(bot);
      });
    }
    this.updateStatus(bot);
  }

  private newPod(bot: FakeBot): Json {
    const template = bot.deployment.spec.template;
    const hash = hashOf(template);
    const container = template.spec.containers[0];
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: `${bot.deployment.metadata.name}-${hash.slice(0, 8)}-${randomBytes(3).toString('hex')}`,
        namespace: this.namespace,
        labels: { ...template.metadata.labels, 'pod-template-hash': hash },
        annotations: template.metadata.annotations ?? {},
        creationTimestamp: timestamp(),
        uid: randomBytes(8).toString('hex'),
      },
      spec: { containers: template.spec.containers, nodeName: NODE.name, terminationGracePeriodSeconds: 30 },
      status: {
        phase: 'Pending',
        podIP: bot.spec.podIP ?? `10.244.0.${this.nextAddress++}`,
        conditions: [{ type: 'Ready', status: 'False' }],
        containerStatuses: [{ name: container.name, ready: false, restartCount: 0, state: { waiting: { reason: 'ContainerCreating' } } }],
      },
    };
    bot.pods.push(pod);
    return pod;
  }

  private markRunning(bot: FakeBot, pod: Json): void {
    if (!bot.pods.includes(pod) || pod.metadata.deletionTimestamp) return;
    const now = timestamp();
    pod.status.phase = 'Running';
    pod.status.startTime = now;
    pod.status.conditions = [{ type: 'Ready', status: 'True' }];
    pod.status.containerStatuses[0] = { ...pod.status.containerStatuses[0], ready: true, state: { running: { startedAt: now } } };
  }

  /** Marks the pod for deletion; it goes after a short grace, taking its logs with it. */
  private terminate(bot: FakeBot, pod: Json): void {
    pod.metadata.deletionTimestamp = timestamp();
    this.later(20, () => {
      bot.pods = bot.pods.filter((p) => p !== pod);
      this.updateStatus(bot);
    });
  }

  private updateStatus(bot: FakeBot): void {
    const template = hashOf(bot.deployment.spec.template);
    const live = bot.pods.filter((pod) => !pod.metadata.deletionTimestamp);
    const ready = live.filter((pod) => pod.status.phase === 'Running');
    bot.deployment.status = {
      observedGeneration: bot.deployment.metadata.generation,
      replicas: live.length,
      updatedReplicas: live.filter((pod) => pod.metadata.labels['pod-template-hash'] === template).length,
      readyReplicas: ready.length,
      availableReplicas: ready.length,
    };
  }

  private podLog(pod: Json, query: URLSearchParams): string {
    const bot = [...this.bots.values()].find((b) => b.pods.includes(pod));
    const container = query.get('container');
    if (container !== null && !pod.spec.containers.some((c: Json) => c.name === container)) {
      throw new ApiError(400, `container ${container} is not valid for pod ${pod.metadata.name}`);
    }
    if (query.get('previous') === 'true') {
      throw new ApiError(400, `previous terminated container "${container}" in pod "${pod.metadata.name}" not found`);
    }
    const tail = query.get('tailLines');
    const lines = bot?.spec.logLines ?? [];
    const shown = tail === null ? lines : lines.slice(-Number(tail));
    const text = shown.map((line) => `${line}\n`).join('');
    // As the kubelet does: limitBytes keeps the first bytes of what would be sent.
    const limit = query.get('limitBytes');
    return limit === null ? text : Buffer.from(text).subarray(0, Number(limit)).toString('utf8');
  }

  private podMetrics(name: string | undefined): Json {
    if (!this.metricsServer) throw new ApiError(404, 'the server could not find the requested resource');
    const pod = [...this.bots.values()].flatMap((b) => b.pods).find((p) => p.metadata.name === name && p.status.phase === 'Running');
    if (!pod) throw new ApiError(404, `podmetrics.metrics.k8s.io "${name}" not found`, { name, group: 'metrics.k8s.io', kind: 'pods' });
    const bot = [...this.bots.values()].find((b) => b.pods.includes(pod));
    return {
      kind: 'PodMetrics',
      apiVersion: 'metrics.k8s.io/v1beta1',
      metadata: { name, namespace: this.namespace },
      timestamp: timestamp(),
      window: '30s',
      containers: [{ name: pod.spec.containers[0].name, usage: bot?.spec.usage }],
    };
  }

  private later(ms: number, action: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      action();
    }, ms);
    this.timers.add(timer);
  }
}

function scaleOf(bot: FakeBot): Json {
  const { metadata, spec, status } = bot.deployment;
  return {
    apiVersion: 'autoscaling/v1',
    kind: 'Scale',
    metadata: { name: metadata.name, namespace: metadata.namespace, resourceVersion: metadata.resourceVersion },
    spec: { replicas: spec.replicas },
    status: { replicas: status.replicas ?? 0, selector: Object.entries(spec.selector.matchLabels).map(([k, v]) => `${k}=${v}`).join(',') },
  };
}

/** A request as `requests` keeps it: its verb, resource and status, e.g. `list apps/deployments 200`. */
function requestLine(route: Route | undefined, code: number): string {
  const what = route ? `${route.apiGroup ? `${route.apiGroup}/` : ''}${route.resource}${route.subresource ? `/${route.subresource}` : ''}` : 'unknown';
  return `${route?.verb ?? '?'} ${what} ${code}`;
}

function podFields(pod: Json): Record<string, string | undefined> {
  return { 'status.phase': pod.status.phase, 'status.podIP': pod.status.podIP, 'spec.nodeName': pod.spec.nodeName };
}

/** The patch a content type names; anything else is the API server's 415. */
function patchOf(contentType: string | undefined, body: string): (target: Json) => Json {
  let parsed: Json;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw new ApiError(400, 'the request body is not JSON');
  }
  switch (contentType?.split(';')[0]?.trim()) {
    case 'application/merge-patch+json':
    // Strategic merge differs from merge only for lists, which the agent never patches.
    case 'application/strategic-merge-patch+json':
      return (target) => mergePatch(target, parsed);
    case 'application/json-patch+json':
      return (target) => jsonPatch(target, parsed);
    default:
      throw new ApiError(415, `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`);
  }
}

function forbidden(route: Route, serviceAccountNamespace: string): ApiError {
  const resource = `${route.resource}${route.apiGroup ? `.${route.apiGroup}` : ''}`;
  const target = route.name ? `${resource} "${route.name}"` : resource;
  const full = `${route.resource}${route.subresource ? `/${route.subresource}` : ''}`;
  const where = route.namespace ? ` in the namespace "${route.namespace}"` : ' at the cluster scope';
  return new ApiError(
    403,
    `${target} is forbidden: User "system:serviceaccount:${serviceAccountNamespace}:bot-agent" cannot ${route.verb} resource "${full}" in API group "${route.apiGroup}"${where}`,
  );
}

const ROUTES: Array<[RegExp, string, string]> = [
  [/^\/apis\/apps\/v1\/namespaces\/([^/]+)\/(deployments)(?:\/([^/]+)(?:\/(scale))?)?$/, 'apps', 'namespaced'],
  [/^\/api\/v1\/namespaces\/([^/]+)\/(pods)(?:\/([^/]+)(?:\/(log))?)?$/, '', 'namespaced'],
  [/^\/apis\/metrics\.k8s\.io\/v1beta1\/namespaces\/([^/]+)\/(pods)(?:\/([^/]+))?$/, 'metrics.k8s.io', 'namespaced'],
  [/^\/api\/v1\/namespaces\/([^/]+)\/(secrets)(?:\/([^/]+))?$/, '', 'namespaced'],
  [/^\/api\/v1\/(nodes)(?:\/([^/]+))?$/, '', 'cluster'],
];

/** The RBAC attributes of a request, as the API server derives them; undefined for an unknown path. */
function routeOf(method: string, path: string, query: URLSearchParams): Route | undefined {
  for (const [pattern, apiGroup, scope] of ROUTES) {
    const match = pattern.exec(path);
    if (!match) continue;
    const [namespace, resource, name, subresource] =
      scope === 'cluster' ? [undefined, match[1], match[2], undefined] : [match[1], match[2], match[3], match[4]];
    const watch = query.get('watch') === 'true';
    const verbs: Record<string, string> = {
      GET: name ? 'get' : watch ? 'watch' : 'list',
      PATCH: 'patch',
      PUT: 'update',
      POST: 'create',
      DELETE: name ? 'delete' : 'deletecollection',
    };
    return {
      verb: verbs[method] ?? method.toLowerCase(),
      apiGroup,
      resource: resource ?? '',
      subresource,
      namespace,
      name,
      watch,
    };
  }
  return undefined;
}

async function readBody(req: IncomingMessage): Promise<string> {
  let text = '';
  for await (const chunk of req) text += String(chunk);
  return text;
}
