import type { AppsV1Api, CoreV1Api, KubeConfig, V1Container, V1Deployment, V1Pod, V1PodTemplateSpec } from '@kubernetes/client-node';
import { messages, NotFound, OperationInProgress, RegistryRefused } from '../../errors.js';
import type { AgentError } from '../../errors.js';
import { PLATFORM_VARIABLES } from '../../provisioning/bot-spec.js';
import type { BotChange, CandidateState, LeftDeploy, RevisionRuntime, RevisionSpec } from '../../provisioning/revisions.js';
import { BOT_LABEL, REVISION_LABEL, revisionIn } from '../labels.js';
import { lastLines } from '../log-tail.js';
import { pullFailure } from '../pull-failure.js';
import { withDeadline } from './kube-deadline.js';
import { apiStatus, translateKubeError } from './kube-errors.js';
import { readPodLogs } from './kube-logs.js';
import { objectName } from './kube-names.js';
import { namesOf, podEventsOf, PULL_FAILURES, RefusalJudge } from './kube-pull-state.js';

/** The deploy under way on a Deployment (docs/api.md §15): its hold, and what it goes back to. */
const DEPLOY_ANNOTATION = 'bot-agent/deploy';
/** The previous revision, kept to go back to: its number and its pod template. */
const PREVIOUS_ANNOTATION = 'bot-agent/previous-revision';
export const PREVIOUS_TEMPLATE_ANNOTATION = 'bot-agent/previous-template';
/** The kubelet's reasons for a container whose image it cannot pull. */
const LOOK_MS = 500;
/** How often a write that met a newer resourceVersion (not another deploy's) is tried again. */
const CONFLICT_TRIES = 5;

interface DeployUnderWay {
  readonly from: number;
  readonly to: number;
  readonly deadlineAtMs: number;
  readonly template: V1PodTemplateSpec;
}

/** What makes a revision's pod template, from the bot's current one and a change. */
export type TemplateChange = (template: V1PodTemplateSpec, change: BotChange, revision: number) => Promise<V1PodTemplateSpec>;

/**
 * Revisions of bots on Kubernetes (docs/api.md §15): a deploy is a rollout of the bot's Deployment with the
 * `Recreate` strategy (the old pod gone before the new one starts: never two runs); the revision before is
 * kept on the Deployment (its number and pod template, besides the ReplicaSet Kubernetes keeps) to go back
 * to. A deploy under way is an annotation set with the Deployment's resourceVersion: one deploy at a time,
 * across agents, and what an agent that died left.
 */
export class KubeRevisions implements RevisionRuntime {
  constructor(
    private readonly apps: AppsV1Api,
    private readonly core: CoreV1Api,
    private readonly kubeConfig: KubeConfig,
    private readonly namespace: string,
    private readonly changed: TemplateChange,
    /** The bots' Deployments as the driver's watch holds them; undefined until it is synced (then they are listed). */
    private readonly watchedDeployments: () => readonly V1Deployment[] | undefined = () => undefined,
  ) {}

  async current(botId: string): Promise<{ revision: number; spec: RevisionSpec }> {
    const deployment = await this.deployment(botId);
    return { revision: revisionOf(deployment.spec?.template), spec: specOf(deployment.spec?.template) };
  }

  async previous(botId: string): Promise<number | undefined> {
    const value = (await this.deployment(botId)).metadata?.annotations?.[PREVIOUS_ANNOTATION];
    return value === undefined ? undefined : Number(value);
  }

  async switchTo(botId: string, revision: number, change: BotChange, deadlineAtMs: number): Promise<RevisionSpec> {
    const deployment = await this.deployment(botId);
    if (underWay(deployment)) throw new OperationInProgress(messages.deployInProgress(botId));
    const template = deployment.spec!.template;
    const next = await this.changed(structuredClone(template), change, revision);
    const deploy: DeployUnderWay = { from: revisionOf(template), to: revision, deadlineAtMs, template };
    try {
      await this.replace(botId, deployment, (d) => {
        d.metadata!.annotations = { ...d.metadata?.annotations, [DEPLOY_ANNOTATION]: JSON.stringify(deploy) };
        d.spec!.strategy = { type: 'Recreate' };
        d.spec!.template = next;
      });
    } catch (err) {
      // Not deployed (another deploy's 409, a refusal): the login made for this revision goes with it.
      await this.forgetLogins(next, [template, keptTemplate(deployment)]);
      throw err;
    }
    // Answered once the new run has started (or ended at once); a pull the kubelet cannot make is the deploy's error.
    const refused = await this.awaitRun(botId, revision, deadlineAtMs, next.spec?.containers[0]?.image ?? '');
    if (refused) {
      await this.undo(botId);
      throw refused;
    }
    return specOf(next);
  }

  async candidate(botId: string): Promise<CandidateState> {
    const { pod, deploy } = await this.judgedPod(botId);
    const status = pod?.status?.containerStatuses?.[0];
    if (pod === undefined || status === undefined) return { exists: pod !== undefined || deploy === undefined, running: false, startedAtMs: undefined, restarts: 0, health: 'none', exitCode: null };
    const started = status.state?.running?.startedAt ?? status.state?.terminated?.startedAt ?? status.lastState?.terminated?.startedAt;
    const probed = pod.spec?.containers[0]?.readinessProbe !== undefined;
    return {
      exists: true,
      running: status.state?.running !== undefined,
      startedAtMs: started === undefined ? undefined : new Date(started).getTime(),
      restarts: status.restartCount,
      health: !probed ? 'none' : status.ready ? 'healthy' : 'starting',
      exitCode: status.state?.terminated?.exitCode ?? status.lastState?.terminated?.exitCode ?? null,
    };
  }

  async lastLines(botId: string, lines: number): Promise<string> {
    const { pod } = await this.judgedPod(botId);
    if (pod === undefined) return '';
    const target = { namespace: this.namespace, pod: pod.metadata!.name!, container: undefined };
    // The kubelet restarts a run that exited: the lines that tell why it failed are then the run before, and the new
    // one may not have printed yet (seen in CI: no lines at all), or not be readable yet. A container waiting to
    // restart answers the run before as its own already.
    const status = pod.status?.containerStatuses?.[0];
    const restarted = status?.lastState?.terminated !== undefined;
    const current = await readPodLogs(this.core, this.kubeConfig, { ...target, previous: false }, lines).catch((err: unknown) => {
      if (restarted) return '';
      throw err;
    });
    if (!restarted || (status.state?.running === undefined && current !== '')) return current;
    const before = await readPodLogs(this.core, this.kubeConfig, { ...target, previous: true }, lines).catch(() => '');
    // A run's last line without its newline stays a line of its own.
    return lastLines(Buffer.from(before === '' || before.endsWith('\n') ? before + current : `${before}\n${current}`), lines);
  }

  async keep(botId: string): Promise<void> {
    const deployment = await this.deployment(botId);
    const deploy = underWay(deployment);
    if (deploy === undefined) return;
    const dropped = keptTemplate(deployment);
    await this.replace(botId, deployment, (d) => {
      d.metadata!.annotations = {
        ...withoutDeploy(d.metadata?.annotations),
        [PREVIOUS_ANNOTATION]: String(deploy.from),
        [PREVIOUS_TEMPLATE_ANNOTATION]: JSON.stringify(deploy.template),
      };
    });
    // The revision kept before this one is kept no more: its own login goes, where no kept revision names it.
    await this.forgetLogins(dropped, [deployment.spec?.template, deploy.template]);
  }

  async undo(botId: string): Promise<void> {
    const deployment = await this.deployment(botId);
    const deploy = underWay(deployment);
    if (deploy === undefined) return;
    await this.replace(botId, deployment, (d) => {
      d.metadata!.annotations = withoutDeploy(d.metadata?.annotations);
      d.spec!.template = deploy.template;
    });
    await this.forgetLogins(deployment.spec?.template, [deploy.template, keptTemplate(deployment)]);
  }

  /** Deletes the revision logins (`<deployment>-pull-r<N>`) `dropped` names that none of `kept` does. */
  private async forgetLogins(dropped: V1PodTemplateSpec | undefined, kept: (V1PodTemplateSpec | undefined)[]): Promise<void> {
    const named = (template: V1PodTemplateSpec | undefined) => (template?.spec?.imagePullSecrets ?? []).map((secret) => secret.name ?? '').filter((name) => /-pull-r\d+$/.test(name));
    const still = new Set(kept.flatMap(named));
    for (const name of named(dropped).filter((secret) => !still.has(secret))) {
      await this.core.deleteNamespacedSecret({ name, namespace: this.namespace }, withDeadline()).catch(() => undefined);
    }
  }

  async rollBack(botId: string): Promise<{ from: number; to: number }> {
    const deployment = await this.deployment(botId);
    if (underWay(deployment)) throw new OperationInProgress(messages.deployInProgress(botId));
    const kept = keptTemplate(deployment);
    if (deployment.metadata?.annotations?.[PREVIOUS_ANNOTATION] === undefined || kept === undefined) throw new NotFound(`bot ${botId} has no previous revision to roll back to`);
    const template = deployment.spec!.template;
    const from = revisionOf(template);
    const to = revisionOf(kept);
    await this.replace(botId, deployment, (d) => {
      d.metadata!.annotations = { ...d.metadata?.annotations, [PREVIOUS_ANNOTATION]: String(from), [PREVIOUS_TEMPLATE_ANNOTATION]: JSON.stringify(template) };
      d.spec!.strategy = { type: 'Recreate' };
      d.spec!.template = kept;
    });
    return { from, to };
  }

  async leftDeploys(): Promise<LeftDeploy[]> {
    // Looked for every 15 s: from the watch, not a list of every Deployment (5,000 of them, 15 MB parsed each time).
    const deployments =
      this.watchedDeployments() ??
      (await this.call(undefined, () => this.apps.listNamespacedDeployment({ namespace: this.namespace, labelSelector: BOT_LABEL }, withDeadline()))).items;
    return deployments.flatMap((deployment) => {
      const deploy = underWay(deployment);
      const botId = deployment.metadata?.labels?.[BOT_LABEL];
      return deploy === undefined || botId === undefined ? [] : [{ botId, from: deploy.from, to: deploy.to, deadlineAtMs: deploy.deadlineAtMs }];
    });
  }

  async settle(left: LeftDeploy): Promise<void> {
    await this.undo(left.botId);
  }

  /** Waits for the revision's pod to run (or to have ended): undefined then, or at the deadline; the pull's error when the kubelet cannot pull. */
  private async awaitRun(botId: string, revision: number, deadlineAtMs: number, image: string): Promise<AgentError | undefined> {
    const refusals = new RefusalJudge((secret) => secret.startsWith(`${objectName(botId)}-pull`));
    while (Date.now() < deadlineAtMs) {
      const pod = await this.podOf(botId, revision);
      const status = pod?.status?.containerStatuses?.[0];
      if (status?.state?.running || status?.state?.terminated || status?.lastState?.terminated) return undefined;
      const waiting = status?.state?.waiting;
      if (pod !== undefined && waiting !== undefined && PULL_FAILURES.has(waiting.reason ?? '')) {
        const words = waiting.message ?? waiting.reason ?? '';
        const failure = pullFailure(image, words, undefined);
        if (!(failure instanceof RegistryRefused)) return failure;
        const events = await this.call(botId, () => podEventsOf(this.core, this.namespace, namesOf([pod])));
        const verdict = refusals.verdict(events, words);
        if (verdict !== undefined) return pullFailure(image, verdict, undefined);
      }
      await new Promise((resolve) => setTimeout(resolve, LOOK_MS));
    }
    return undefined;
  }

  /** The pod of the bot's revision (the newest, not being deleted). */
  /**
   * The pod of the run judged: a deploy's new revision's, or with no deploy under way the revision the bot has
   * (a new bot's first, whose pod may not be made yet).
   */
  private async judgedPod(botId: string): Promise<{ pod: V1Pod | undefined; deploy: DeployUnderWay | undefined }> {
    const deployment = await this.deployment(botId);
    const deploy = underWay(deployment);
    return { pod: await this.podOf(botId, deploy?.to ?? revisionOf(deployment.spec?.template)), deploy };
  }

  private async podOf(botId: string, revision: number): Promise<V1Pod | undefined> {
    const pods = await this.call(botId, () => this.core.listNamespacedPod({ namespace: this.namespace, labelSelector: `${BOT_LABEL}=${botId}` }, withDeadline()));
    return pods.items
      .filter((pod) => !pod.metadata?.deletionTimestamp && revisionOf(pod) === revision)
      .sort((a, b) => (b.metadata?.creationTimestamp?.getTime() ?? 0) - (a.metadata?.creationTimestamp?.getTime() ?? 0))[0];
  }

  private async deployment(botId: string): Promise<V1Deployment> {
    const found = await this.call(botId, () => this.apps.listNamespacedDeployment({ namespace: this.namespace, labelSelector: `${BOT_LABEL}=${botId}` }, withDeadline()));
    const deployment = found.items[0];
    if (deployment?.spec?.template === undefined) throw new NotFound(messages.botNotFound(botId));
    return deployment;
  }

  /**
   * Writes the Deployment as `edit` leaves it, against the resourceVersion read. A conflict is tried again on
   * a fresh read while the deploy annotation is still the one read (the controller's own status updates move
   * the resourceVersion too); one changed meanwhile is another deploy's: 409.
   */
  private async replace(botId: string, deployment: V1Deployment, edit: (deployment: V1Deployment) => void): Promise<void> {
    const hold = deployment.metadata?.annotations?.[DEPLOY_ANNOTATION];
    let current = deployment;
    for (let attempt = 1; ; attempt += 1) {
      const next = structuredClone(current);
      edit(next);
      try {
        await this.apps.replaceNamespacedDeployment({ name: next.metadata!.name!, namespace: this.namespace, body: next }, withDeadline());
        return;
      } catch (err) {
        if (apiStatus(err) !== 409) throw translateKubeError(err, botId);
      }
      current = await this.deployment(botId);
      if (attempt >= CONFLICT_TRIES || current.metadata?.annotations?.[DEPLOY_ANNOTATION] !== hold) throw new OperationInProgress(messages.deployInProgress(botId));
    }
  }

  private async call<T>(botId: string | undefined, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      throw translateKubeError(err, botId);
    }
  }
}

/** The revision a pod template (or a pod) carries; one without is revision 1. */
export function revisionOf(object: { metadata?: { annotations?: Record<string, string> } } | undefined): number {
  return revisionIn(object?.metadata?.annotations?.[REVISION_LABEL]);
}

/** The deploy under way on the Deployment, if any. */
function underWay(deployment: V1Deployment): DeployUnderWay | undefined {
  return annotationJson<DeployUnderWay>(deployment, DEPLOY_ANNOTATION);
}

/** The pod template kept on the Deployment to go back to, if any. */
export function keptTemplate(deployment: V1Deployment): V1PodTemplateSpec | undefined {
  return annotationJson<V1PodTemplateSpec>(deployment, PREVIOUS_TEMPLATE_ANNOTATION);
}

/** An annotation's JSON; undefined when it is absent or not JSON (anyone who may edit the Deployment may write it). */
function annotationJson<T>(deployment: V1Deployment, name: string): T | undefined {
  const value = deployment.metadata?.annotations?.[name];
  if (value === undefined) return undefined;
  try {
    return JSON.parse(value) as T;
  } catch {
    return undefined;
  }
}

function withoutDeploy(annotations: Record<string, string> | undefined): Record<string, string> {
  const { [DEPLOY_ANNOTATION]: _deploy, ...rest } = annotations ?? {};
  return rest;
}

/** What a pod template runs, as a revision's record shows it: the names of its extra variables, never their values. */
function specOf(template: V1PodTemplateSpec | undefined): RevisionSpec {
  const container: V1Container | undefined = template?.spec?.containers[0];
  const limits = container?.resources?.limits ?? {};
  const exec = container?.livenessProbe?.exec?.command;
  return {
    image: container?.image ?? '',
    command: container?.command ?? null,
    env: (container?.env ?? []).filter((entry) => entry.value !== undefined && !PLATFORM_VARIABLES.has(entry.name)).map((entry) => entry.name),
    memory_limit: limits.memory === undefined ? null : Number(limits.memory),
    cpu_limit: limits.cpu === undefined ? null : Number.parseInt(limits.cpu, 10) / 1000,
    health: exec === undefined ? null : { exec },
  };
}
