import { NotFound, OperationInProgress } from '../errors.js';
import type { DeployMarks } from '../lifecycle/deploy-marks.js';
import { InFlightDeploys } from './in-flight.js';
import { endOf, endReasonOf, judgeRun } from './run-verdict.js';
import type { RunVerdict } from './run-verdict.js';
import type { BotHistory } from '../history/bot-history.js';
import { EXIT_LOG_BYTES } from '../history/history-store.js';
import type { RevisionOutcome, RevisionRecord } from '../history/history-store.js';
import { fitJson } from '../json-text.js';
import type { PullReport } from '../provisioning/provisioner.js';
import type { BotChange, LeftDeploy, RevisionRuntime, RevisionSpec } from '../provisioning/revisions.js';
import type { FaultReporter } from '../runtime/driver.js';

/** A deploy as the platform asks for it (docs/api.md §15). */
export interface DeployRequest {
  readonly change: BotChange;
  /** How long the new run must be up (and healthy, where it has a check) to succeed. */
  readonly minReadyS: number;
  /** How long it may take to get there, from the switch. */
  readonly deadlineS: number;
  /** Whether a failure goes back to the previous revision by itself. */
  readonly rollback: boolean;
}

/** The lines of a failed run that its `deploy-failed` event carries. */
const FAILED_LINES = 20;
/** How often a deploy looks at its new run. */
const WATCH_EVERY_MS = 500;
/** How often a new bot's first run is looked at: a platform that makes a thousand bots at once asks the runtime less. */
const FIRST_RUN_WATCH_EVERY_MS = 2_000;
/** How long after a deploy's deadline, or after first finding it left without a new run, another agent settles it. */
const LEFT_GRACE_MS = 30_000;
/** How old a revision still `deploying` with no deploy left must be before any agent settles its record. */
const UNJUDGED_MS = 10 * 60_000;
const FIRST_RUN_REPLACED = 'a deploy or rollback replaced its first run before it was judged';
/** How often the agent looks for deploys a dead agent left. */
const LEFT_EVERY_MS = 15_000;

export const DEFAULT_MIN_READY_S = 10;
export const DEFAULT_DEADLINE_S = 120;
/** How old a revision 1 still `deploying` must be before any agent settles it: its judging's deadline, and some. */
const FIRST_RUN_UNJUDGED_MS = (DEFAULT_DEADLINE_S + 60) * 1000;

/**
 * Deploys and rollbacks (docs/api.md §15): switches a bot to a new revision, judges the new run on its
 * uptime and health, keeps it or goes back, and tells each step as a revision record and an event.
 * Finds what a dead agent left (at start, then now and then) and settles it: one run, never two.
 */
export class Deploys {
  private readonly watches = new Set<Promise<void>>();
  private leftTimer: NodeJS.Timeout | undefined;
  /** Deploys found left without a new run, and when: settled once seen again LEFT_GRACE_MS later. */
  private readonly seenLeft = new Map<string, number>();
  /** Bots whose first run (revision 1) is being judged, and how to cut that short. */
  private readonly firstRuns = new Map<string, { readonly cut: AbortController; readonly judged: Promise<void> }>();
  private closed = false;

  constructor(
    private readonly runtime: RevisionRuntime,
    private readonly history: BotHistory,
    private readonly marks: DeployMarks,
    /** Resolves once the lifecycle operations on the bot under way have ended. */
    private readonly idle: (botId: string) => Promise<void>,
    private readonly report: FaultReporter,
    /** This agent's deploys under way, kept where its next life finds them. */
    private readonly inFlight: InFlightDeploys = new InFlightDeploys(undefined),
    private readonly options: { readonly watchEveryMs?: number; readonly now?: () => number } = {},
  ) {}

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  /**
   * Switches the bot to a new revision made of `change`, and answers its number once the new run is
   * started; it is judged after. Throws what the switch threw (a pull's error, 409, 422): then the bot runs as before.
   */
  async deploy(botId: string, request: DeployRequest, by: string, pulls?: PullReport): Promise<number> {
    const release = this.marks.hold(botId);
    try {
      await this.idle(botId);
      // A pull that fails takes no revision number: nothing of the bot changed (its pull-failed event tells it).
      await this.runtime.prepare?.(botId, request.change, pulls);
      // One read of the kept revisions serves both: a revision 1 left judging, and the number past every one kept.
      const kept = await this.history.revisions(botId, 50).catch(() => []);
      await this.cutFirstRun(botId, kept);
      const { from, revision } = await this.nextRevision(botId, kept);
      const at = new Date(this.now()).toISOString();
      const deadlineAtMs = this.now() + request.deadlineS * 1000;
      let spec: RevisionSpec;
      this.inFlight.begin(botId, revision);
      try {
        spec = await this.runtime.switchTo(botId, revision, request.change, deadlineAtMs, pulls);
      } catch (err) {
        this.inFlight.end(botId);
        // Nothing changed; an error of its own, not a revision, when another deploy holds the bot.
        if (!(err instanceof OperationInProgress)) {
          const reason = (err as Error).message;
          await this.history.revision(botId, record(revision, {}, by, at, 'failed', reason), { type: 'deploy-failed', fields: { reason, rolled_back: false } });
        }
        throw err;
      }
      await this.history.revision(botId, record(revision, spec, by, at, 'deploying', null), { type: 'deploy-started', fields: { image: spec.image, by } });
      let held = true;
      const releaseOnce = (): void => {
        if (held) release();
        held = false;
      };
      this.track(
        this.judge(botId, { from, revision }, spec, by, at, request, deadlineAtMs, releaseOnce).finally(() => {
          // Closed mid-deploy, the mark stays: the next life settles the deploy.
          if (!this.closed) this.inFlight.end(botId);
          releaseOnce();
        }),
      );
      return revision;
    } catch (err) {
      release();
      throw err;
    }
  }

  /**
   * A bot just created: its revision 1, `deploying` until its first run is judged as a deploy's is, with the
   * defaults (docs/api.md §15). A failure to keep it is the history's to report, not the create's.
   */
  async created(botId: string, by: string): Promise<void> {
    try {
      const { revision, spec } = await this.runtime.current(botId);
      const at = new Date(this.now()).toISOString();
      await this.history.revision(botId, record(revision, spec, by, at, 'deploying', null));
      const cut = new AbortController();
      const judged = this.judgeFirstRun(botId, revision, spec, by, at, cut.signal).finally(() => {
        if (this.firstRuns.get(botId)?.cut === cut) this.firstRuns.delete(botId);
      });
      this.firstRuns.set(botId, { cut, judged });
      this.track(judged);
    } catch (err) {
      this.report(`the first revision of bot ${botId} could not be kept`, err);
    }
  }

  /**
   * Judges a new bot's first run: `failed` (with a `deploy-failed` event; there is nothing to go back to) when
   * it ends by itself, turns unhealthy or is not up in time; `interrupted` when a restart, stop, deploy or
   * rollback came first; else `succeeded`. A bot removed meanwhile is left unsaid.
   */
  private async judgeFirstRun(botId: string, revision: number, spec: RevisionSpec, by: string, at: string, cut: AbortSignal): Promise<void> {
    let requested = false;
    let verdict: RunVerdict;
    try {
      verdict = await judgeRun({
        read: () => this.runtime.candidate(botId),
        endReason: async (first, state) => {
          const end = await endOf(this.history, botId, first, state);
          requested = end.requested;
          return end.reason;
        },
        minReadyS: DEFAULT_MIN_READY_S,
        deadlineS: DEFAULT_DEADLINE_S,
        deadlineAtMs: Date.parse(at) + DEFAULT_DEADLINE_S * 1000,
        now: () => this.now(),
        everyMs: this.options.watchEveryMs ?? FIRST_RUN_WATCH_EVERY_MS,
        stopped: () => this.closed || cut.aborted,
        awaitStart: true,
        wake: cut,
      });
    } catch (err) {
      if (err instanceof NotFound) return;
      verdict = { ok: false, reason: `its run could not be read: ${(err as Error).message}` };
    }
    // Closed, it stays `deploying`: an agent settles it from what runs (docs/api.md §15).
    if (this.closed) return;
    const ended = new Date(this.now()).toISOString();
    try {
      if (verdict.ok) {
        await this.history.revision(botId, record(revision, spec, by, at, 'succeeded', null, ended));
      } else if (cut.aborted || requested) {
        const reason = cut.aborted ? FIRST_RUN_REPLACED : 'its first run was ended on request before it was judged';
        await this.history.revision(botId, record(revision, spec, by, at, 'interrupted', reason, ended));
      } else if (verdict.reason !== 'its run was removed') {
        const logs = fitJson(await this.runtime.lastLines(botId, FAILED_LINES).catch(() => ''), EXIT_LOG_BYTES);
        await this.history.revision(botId, record(revision, spec, by, at, 'failed', verdict.reason, ended), { type: 'deploy-failed', fields: { reason: verdict.reason, logs, rolled_back: false } });
      }
    } catch (err) {
      this.report(`the first revision of bot ${botId} could not be judged`, err);
    }
  }

  /**
   * Ends the judging of the bot's first run before a deploy or rollback changes what runs: this agent's at once,
   * and a revision 1 still `deploying` that no judging here holds (its agent died) is written `interrupted` too.
   */
  private async cutFirstRun(botId: string, kept?: readonly RevisionRecord[]): Promise<void> {
    const judging = this.firstRuns.get(botId);
    if (judging !== undefined) {
      judging.cut.abort();
      await judging.judged;
      return;
    }
    const left = (kept ?? (await this.history.revisions(botId, 50).catch(() => []))).find((record) => record.revision === 1 && record.outcome === 'deploying');
    if (left === undefined) return;
    const at = new Date(this.now()).toISOString();
    await this.history.revision(botId, { ...left, outcome: 'interrupted', reason: FIRST_RUN_REPLACED, ended_at: at });
  }

  /** Back to the previous revision, on the platform's request; answers the revisions left and reached. */
  async rollback(botId: string, by: string): Promise<{ from: number; to: number }> {
    const release = this.marks.hold(botId);
    try {
      await this.idle(botId);
      await this.cutFirstRun(botId);
      this.inFlight.begin(botId);
      try {
        const moved = await this.runtime.rollBack(botId);
        await this.ended(botId, moved.from, 'rolled-back', `rolled back by ${by}`, { type: 'rolled-back', fields: { from_revision: moved.from, to_revision: moved.to, by } });
        return moved;
      } finally {
        // Ended or refused, it is this life's no longer (a cut-off leaves the mark for the next).
        this.inFlight.end(botId);
      }
    } finally {
      release();
    }
  }

  /** Settles what dead agents left (now, then every LEFT_EVERY_MS): at start every deploy found is one. */
  start(): void {
    void this.settleLeft(true);
    this.leftTimer = setInterval(() => void this.settleLeft(false), LEFT_EVERY_MS);
    this.leftTimer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.leftTimer);
    // A deploy under way is left as it is: the next agent to start settles it.
    await Promise.allSettled([...this.watches]);
  }

  private track(watch: Promise<void>): void {
    this.watches.add(watch);
    void watch.finally(() => this.watches.delete(watch));
  }

  /** The revision the bot runs, and the number of the next: past every one it ran or was `kept` (newest first). */
  private async nextRevision(botId: string, kept: readonly RevisionRecord[]): Promise<{ from: number; revision: number }> {
    const [{ revision }, previous] = await Promise.all([this.runtime.current(botId), this.runtime.previous(botId)]);
    return { from: revision, revision: Math.max(revision, previous ?? 0, kept[0]?.revision ?? 0) + 1 };
  }

  /** Watches the new run until it succeeds or fails, then keeps it or goes back. */
  private async judge(
    botId: string,
    { from, revision }: { from: number; revision: number },
    spec: RevisionSpec,
    by: string,
    at: string,
    request: DeployRequest,
    deadlineAtMs: number,
    /** The bot is one run again: its operations, and a next deploy, may go on before the outcome is written. */
    settled: () => void,
  ): Promise<void> {
    let verdict: RunVerdict;
    try {
      verdict = await this.verdict(botId, request, deadlineAtMs);
    } catch (err) {
      verdict = { ok: false, reason: `its run could not be read: ${(err as Error).message}` };
    }
    if (this.closed) return;
    const done = (outcome: RevisionOutcome, reason: string | null) => record(revision, spec, by, at, outcome, reason, new Date(this.now()).toISOString());
    try {
      if (verdict.ok) {
        await this.runtime.keep(botId);
        settled();
        await this.history.revision(botId, done('succeeded', null), { type: 'deploy-succeeded', fields: { image: spec.image } });
        return;
      }
      // Bounded as an exit record's are (docs/api.md §8): a run that writes long lines does not make a long event.
      const logs = fitJson(await this.runtime.lastLines(botId, FAILED_LINES).catch(() => ''), EXIT_LOG_BYTES);
      if (!request.rollback) {
        await this.runtime.keep(botId);
        settled();
        await this.history.revision(botId, done('failed', verdict.reason), { type: 'deploy-failed', fields: { reason: verdict.reason, logs, rolled_back: false } });
        return;
      }
      await this.runtime.undo(botId);
      settled();
      await this.history.revision(botId, done('failed', verdict.reason), { type: 'deploy-failed', fields: { reason: verdict.reason, logs, rolled_back: true } });
      await this.history.note(botId, 'rolled-back', { from_revision: revision, to_revision: from, by: 'agent' });
    } catch (err) {
      // Another agent settled it meanwhile (409), or the engine failed a step: what is left is settled as a dead agent's.
      this.report(`the deploy of bot ${botId} (revision ${revision}) could not be ended`, err);
    }
  }

  private verdict(botId: string, request: DeployRequest, deadlineAtMs: number): Promise<RunVerdict> {
    return judgeRun({
      read: () => this.runtime.candidate(botId),
      // Its end recorded first (not on request, with its lines), before an undo stops or removes what is left of it.
      endReason: (first, state) => endReasonOf(this.history, botId, first, state),
      minReadyS: request.minReadyS,
      deadlineS: request.deadlineS,
      deadlineAtMs,
      now: () => this.now(),
      everyMs: this.options.watchEveryMs ?? WATCH_EVERY_MS,
      stopped: () => this.closed,
    });
  }

  /** A revision's new outcome, with its event; a record never kept (its agent died first) is kept with what is known. */
  private async ended(botId: string, revision: number, outcome: RevisionOutcome, reason: string | null, event: { type: string; fields: Record<string, unknown> }): Promise<void> {
    const [kept] = (await this.history.revisions(botId, 50).catch(() => [])).filter((r) => r.revision === revision);
    const at = new Date(this.now()).toISOString();
    await this.history.revision(botId, record(revision, kept?.spec ?? {}, kept?.by ?? 'platform', kept?.at ?? at, outcome, reason, at), event);
  }

  private async settleLeft(atStart: boolean): Promise<void> {
    let left: LeftDeploy[];
    try {
      left = await this.runtime.leftDeploys();
    } catch (err) {
      if (atStart) this.report('deploys left by an earlier agent could not be looked for; tried again shortly', err);
      return;
    }
    const now = this.now();
    // At start, this agent's own earlier life's deploys are settled at once; another agent's only once surely dead.
    const own = atStart ? this.inFlight.leftByEarlierLife : new Map<string, number | undefined>();
    for (const deploy of left) {
      if (this.closed || this.marks.isHeld(deploy.botId)) continue;
      if (!own.has(deploy.botId) && !this.dueToSettle(deploy, now)) continue;
      this.seenLeft.delete(deploy.botId);
      try {
        // Judged good before its agent could keep it: kept now, not undone.
        if (deploy.to !== undefined && deploy.to > deploy.from && (await this.outcomeOf(deploy.botId, deploy.to)) === 'succeeded') {
          await this.runtime.keep(deploy.botId);
          continue;
        }
        await this.runtime.settle(deploy);
        // The revision cut: its new run's, or where it was cut before that run was made, the one its mark names.
        const cut = deploy.to ?? own.get(deploy.botId);
        if (deploy.to === undefined || deploy.to > deploy.from) await this.interrupted(deploy.botId, cut, deploy.from);
        this.inFlight.end(deploy.botId);
      } catch (err) {
        // Settled by another agent meanwhile (its names moved), or the engine failed: looked at again next time.
        if (!(err instanceof OperationInProgress)) this.report(`the deploy left of bot ${deploy.botId} could not be settled`, err);
      }
    }
    for (const botId of this.seenLeft.keys()) if (!left.some((d) => d.botId === botId)) this.seenLeft.delete(botId);
    await this.settleRecords(left, own);
    // What the earlier life left and is settled now (or was already): its marks go.
    for (const botId of own.keys()) if (!left.some((deploy) => deploy.botId === botId)) this.inFlight.end(botId);
  }

  /**
   * Revisions still `deploying` with no deploy left to settle: their agent died after keeping or undoing the
   * run and before saying so. The bot's run says which: the revision itself runs (kept), or not (undone).
   * Those of this agent's earlier life at once; others once older than UNJUDGED_MS, which no live deploy still judges.
   */
  private async settleRecords(left: LeftDeploy[], own: ReadonlyMap<string, number | undefined>): Promise<void> {
    const unjudged = await this.history.deployingRevisions().catch(() => []);
    for (const { botId, revision, atMs } of unjudged) {
      if (this.closed || this.marks.isHeld(botId) || left.some((deploy) => deploy.botId === botId)) continue;
      // A first run is judged within its deadline by the agent that made the bot: one not judged by then, that agent died.
      const unjudgedMs = revision === 1 ? FIRST_RUN_UNJUDGED_MS : UNJUDGED_MS;
      if (this.firstRuns.has(botId) || (!own.has(botId) && this.now() - atMs < unjudgedMs)) continue;
      const running = await this.runtime.current(botId).then(
        (current) => current.revision,
        () => undefined,
      );
      const kept = running === revision;
      const reason = kept ? null : 'the agent that drove it stopped before it was judged; it was undone';
      await this.ended(botId, revision, kept ? 'succeeded' : 'interrupted', reason, kept ? { type: 'deploy-succeeded', fields: {} } : { type: 'deploy-failed', fields: { reason, rolled_back: true } });
    }
  }

  /**
   * A deploy cut before it was judged, now undone: its revision `interrupted` and the way back told, once. A
   * revision that has an outcome already (a deploy that failed or was rolled back before) is never rewritten,
   * and one not known (another agent's mark, or an older agent's) is left unnamed.
   */
  private async interrupted(botId: string, cut: number | undefined, back: number): Promise<void> {
    if (cut === undefined || cut <= back) {
      this.report(`the deploy left of bot ${botId} was undone; the revision it was for is not known here`, undefined);
      return;
    }
    const outcome = await this.outcomeOf(botId, cut);
    if (outcome !== undefined && outcome !== 'deploying') return;
    const reason = 'the agent that drove it stopped before it was judged; it was undone';
    await this.ended(botId, cut, 'interrupted', reason, { type: 'deploy-failed', fields: { reason, rolled_back: true } });
    await this.history.note(botId, 'rolled-back', { from_revision: cut, to_revision: back, by: 'agent' });
  }

  private async outcomeOf(botId: string, revision: number): Promise<RevisionOutcome | undefined> {
    return (await this.history.revisions(botId, 50).catch(() => [])).find((kept) => kept.revision === revision)?.outcome;
  }

  /** Whether another agent's deploy is surely dead: past its deadline, or seen without a new run for a while. */
  private dueToSettle(deploy: LeftDeploy, now: number): boolean {
    // A deploy's new run carries its deadline; a rollback's (an older revision's run) carries a deadline long past.
    if (deploy.deadlineAtMs !== undefined && deploy.to !== undefined && deploy.to > deploy.from) return now > deploy.deadlineAtMs + LEFT_GRACE_MS;
    const seen = this.seenLeft.get(deploy.botId);
    if (seen === undefined) this.seenLeft.set(deploy.botId, now);
    return seen !== undefined && now - seen >= LEFT_GRACE_MS;
  }
}

function record(revision: number, spec: Readonly<Record<string, unknown>> | RevisionSpec, by: string, at: string, outcome: RevisionOutcome, reason: string | null, endedAt: string | null = null): RevisionRecord {
  return { revision, spec: spec as Record<string, unknown>, by, at, outcome, reason, ended_at: outcome === 'deploying' ? null : endedAt ?? at };
}
