import type { V1ContainerStateTerminated, V1Pod } from '@kubernetes/client-node';
import type { FaultReporter, RunObserver } from '../driver.js';
import { BOT_ID_PATTERN, BOT_LABEL } from '../labels.js';
import { signalName } from '../signal-names.js';
import type { KubeObjectCache } from './kube-object-cache.js';

/** The lines of a run an exit record keeps. */
const EXIT_LOG_LINES = 100;

/**
 * How long an unrequested SIGKILL waits for the kubelet to call it OOMKilled. containerd may learn of an OOM kill
 * after the kubelet read the exit (a late event on a busy node), and says so in the kubelet's next view of that run:
 * its `lastState` once the container is started again (docs/api.md §8).
 */
export const OOM_REASON_WAIT_MS = 15_000;

/** Reads the last lines of a pod's container: its current run, or its previous one. */
export type PodLogsReader = (pod: string, container: string | undefined, previous: boolean, lines: number) => Promise<string>;

/** Whether the kubelet ended a pod's run (from `startedMs` to `endedMs`) for a failed liveness probe, and what the probe said. */
export type LivenessKills = (pod: string, startedMs: number | undefined, endedMs: number) => Promise<{ check: 'exec'; output: string | null } | undefined>;

/** What the watch last saw of one pod. */
interface PodRuns {
  /** Runs already reported as begun, by start time. */
  readonly started: Set<string>;
  /** Runs already reported as ended, by container id or restart count. */
  readonly ended: Set<string>;
  /** The running run's start, for an end the pod's deletion reports. */
  running: Date | undefined;
  /** Lines read when the pod began to be deleted, in case it is gone before its end can be read. */
  linesAtDeletion: Promise<string> | undefined;
  /** What this pod reports, in order: an end (once its lines are read) before the start that follows it. */
  reported: Promise<void>;
  /** The container's restart count as last seen: a run ended before the last restart has its lines in `previous`. */
  restarts: number;
  /** Ends killed by SIGKILL that wait to learn whether the kernel's OOM killer sent it, by run key. */
  readonly awaitingReason: Map<string, (oomKilled: boolean) => void>;
}

/**
 * Turns a watch of the bots' pods into run starts and ends (docs/api.md §8):
 * a container's `lastState.terminated` after the kubelet restarted it (its
 * previous run's lines), `state.terminated` of one that ended, and a pod
 * deleted (a stop, a rollout) while its container ran. Ends of deleted pods
 * are requested; the kubelet's restarts of crashed or OOM-killed containers are not.
 */
export class KubeRunWatcher {
  private readonly pods = new Map<string, PodRuns>();

  constructor(
    private readonly observer: RunObserver,
    private readonly readLogs: PodLogsReader,
    private readonly containerOf: (pod: V1Pod) => string | undefined,
    private readonly report: FaultReporter,
    /** Asked of every end the kubelet made (not a deletion's): none, no end is taken for one of health. */
    private readonly livenessKills: LivenessKills = async () => undefined,
  ) {}

  /** Follows the watched pods: when their watch first lists them, runs it reports again are recorded once (by their keys). */
  watch(pods: KubeObjectCache<V1Pod>): void {
    const guarded = (what: string, handle: (pod: V1Pod) => void) => (pod: V1Pod) => {
      try {
        handle(pod);
      } catch (err) {
        this.report(`a pod ${what} the run watch could not handle`, err);
      }
    };
    pods.on('add', guarded('added', (pod) => this.seen(pod)));
    pods.on('update', guarded('change', (pod) => this.seen(pod)));
    pods.on('delete', guarded('deletion', (pod) => this.deleted(pod)));
  }

  private runsOf(uid: string): PodRuns {
    let runs = this.pods.get(uid);
    if (!runs) {
      runs = { started: new Set(), ended: new Set(), running: undefined, linesAtDeletion: undefined, reported: Promise.resolve(), restarts: 0, awaitingReason: new Map() };
      this.pods.set(uid, runs);
    }
    return runs;
  }

  private seen(pod: V1Pod): void {
    const botId = pod.metadata?.labels?.[BOT_LABEL];
    const uid = pod.metadata?.uid;
    const name = pod.metadata?.name;
    if (!botId || !BOT_ID_PATTERN.test(botId) || !uid || !name) return;
    const container = this.containerOf(pod);
    const status = pod.status?.containerStatuses?.find((s) => s.name === container);
    if (!status) return;
    const runs = this.runsOf(uid);
    const deleting = Boolean(pod.metadata?.deletionTimestamp);
    const restarts = status.restartCount ?? 0;
    runs.restarts = Math.max(runs.restarts, restarts);
    // The lines of a run that ended by the time the container had restarted `restarts` times: the current
    // container's, or the previous one's once the kubelet restarted it meanwhile (the lines are read late, in
    // order); none once it restarted twice, as the kubelet keeps one previous container only.
    const linesOf = async (previous: boolean): Promise<string> => {
      const behind = runs.restarts - restarts + (previous ? 1 : 0);
      if (behind > 1) return '';
      const lines = await this.readLogs(name, container, behind === 1, EXIT_LOG_LINES);
      if (runs.restarts - restarts + (previous ? 1 : 0) === behind) return lines;
      return behind === 0 ? this.readLogs(name, container, true, EXIT_LOG_LINES) : '';
    };

    // A run the kubelet ended and started again: its lines are the container's previous ones.
    const last = status.lastState?.terminated;
    // Only a container with a liveness probe can be killed for it: the others' ends never ask for the pod's events
    // (events are read from etcd itself, every event of the namespace each time: at 5,000 bots, a crash loop's
    // reads of them held etcd at 18 GB; docs/performance.md).
    const probed = pod.spec?.containers.find((c) => c.name === container)?.livenessProbe !== undefined;
    if (last) this.end(botId, uid, name, runs, last, false, probed, () => linesOf(true));
    const ended = status.state?.terminated;
    if (ended) {
      runs.running = undefined;
      // A pod being deleted may answer its lines empty once the kubelet has removed its container: the lines read
      // when the deletion began are then the run's.
      this.end(botId, uid, name, runs, ended, deleting, probed, async () => (await linesOf(false).catch(() => '')) || ((await runs.linesAtDeletion) ?? ''));
    }
    const running = status.state?.running?.startedAt;
    if (running) {
      const startedAt = new Date(running);
      runs.running = startedAt;
      const key = startedAt.toISOString();
      if (!runs.started.has(key)) {
        runs.started.add(key);
        this.inOrder(runs, async () => this.observer.started({ botId, startedAt, key: `kube:${uid}:start:${key}` }));
      }
      // Deletion began: read the lines now, in case the pod is gone before its end is seen.
      if (deleting && !runs.linesAtDeletion) {
        runs.linesAtDeletion = this.readLogs(name, container, false, EXIT_LOG_LINES).catch(() => '');
      }
    }
  }

  private deleted(pod: V1Pod): void {
    const botId = pod.metadata?.labels?.[BOT_LABEL];
    const uid = pod.metadata?.uid;
    if (!botId || !uid) return;
    this.seen(pod);
    const runs = this.pods.get(uid);
    this.pods.delete(uid);
    // No later view of a deleted pod will come: ends still waiting for their reason take what was seen.
    for (const settle of runs?.awaitingReason.values() ?? []) settle(false);
    // Deleted while its container ran, and no end was seen: the deletion ended it. Its key is the run's own, as its end
    // seen by another agent has: one run, one record, whichever agent saw what.
    const runKey = runs?.running && `run:${runs.running.toISOString()}`;
    if (runs && runKey && !runs.ended.has(runKey)) {
      const at = new Date();
      const startedAt = runs.running;
      this.inOrder(runs, async () => {
        const logs = (await runs.linesAtDeletion) ?? '';
        await this.observer.ended({ botId, at, exitCode: null, oomKilled: false, requested: true, startedAt, logs, key: `kube:${uid}:${runKey}` });
      });
    }
  }

  private end(
    botId: string,
    uid: string,
    pod: string,
    runs: PodRuns,
    terminated: V1ContainerStateTerminated,
    requested: boolean,
    probed: boolean,
    lines: () => Promise<string>,
  ): void {
    const startedAt = terminated.startedAt ? new Date(terminated.startedAt) : undefined;
    const runKey = `run:${startedAt?.toISOString() ?? terminated.containerID ?? ''}`;
    const oomKilled = terminated.reason === 'OOMKilled';
    if (oomKilled) runs.awaitingReason.get(runKey)?.(true);
    if (runs.ended.has(runKey)) return;
    runs.ended.add(runKey);
    const at = terminated.finishedAt ? new Date(terminated.finishedAt) : new Date();
    const reason = !oomKilled && !requested && terminated.exitCode === 137 ? this.reasonLater(runs, runKey) : Promise.resolve(oomKilled);
    // A kill for a failed liveness probe is the kubelet's word in the pod's events, which it writes before it kills.
    const unhealthy = requested || !probed ? Promise.resolve(undefined) : this.livenessKills(pod, startedAt?.getTime(), at.getTime()).catch(() => undefined);
    this.inOrder(runs, async () => {
      const logs = await lines().catch(() => '');
      await this.observer.ended({
        botId,
        at,
        exitCode: terminated.exitCode ?? null,
        signal: signalName(terminated.signal),
        oomKilled: await reason,
        requested,
        startedAt,
        logs,
        unhealthy: await unhealthy,
        key: `kube:${uid}:${runKey}`,
      });
    });
  }

  /** Whether a later view of the run calls it OOMKilled, within OOM_REASON_WAIT_MS. */
  private reasonLater(runs: PodRuns, runKey: string): Promise<boolean> {
    return new Promise((resolve) => {
      const settle = (oomKilled: boolean): void => {
        clearTimeout(timer);
        runs.awaitingReason.delete(runKey);
        resolve(oomKilled);
      };
      const timer = setTimeout(() => settle(false), OOM_REASON_WAIT_MS).unref();
      runs.awaitingReason.set(runKey, settle);
    });
  }

  private inOrder(runs: PodRuns, work: () => Promise<void>): void {
    runs.reported = runs.reported.then(work).catch((err: unknown) => this.report('a pod run the agent could not record', err));
  }
}
