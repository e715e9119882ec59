import type { ExitRecord } from '../history/history-store.js';
import type { CandidateState, RevisionRuntime } from '../provisioning/revisions.js';

/** The bot's newest exit records, as the history keeps them (docs/api.md §8). */
export interface ExitReader {
  exits(botId: string, limit: number): Promise<ExitRecord[]>;
}

/** Whether a run stayed up as asked (docs/api.md §15), and why not. */
export type RunVerdict = { readonly ok: true } | { readonly ok: false; readonly reason: string };

/** What a run is judged by: a deploy's new run, a restored bot's run again (docs/api.md §20). */
export interface RunWatch {
  /** The run as the runtime shows it now. */
  read(): Promise<CandidateState>;
  /** Why the run first seen as `first` is over, as `state` shows it gone, ended or restarted. */
  endReason(first: CandidateState, state: CandidateState): Promise<string>;
  /** How long it must be up (and healthy, where it has a check). */
  readonly minReadyS: number;
  /** How long it may take to get there, and when that is. */
  readonly deadlineS: number;
  readonly deadlineAtMs: number;
  readonly now: () => number;
  readonly everyMs: number;
  /** True once the agent stops: the run is judged no further. */
  readonly stopped: () => boolean;
  /** Whether a run not started yet (a new pod's image still pulled) is waited for, within the deadline, rather than failed. */
  readonly awaitStart?: boolean;
  /** Ends a wait between looks at once (then `stopped` says whether to go on). */
  readonly wake?: AbortSignal;
}

/** Waits `ms`, or less once `wake` is aborted. */
function pause(ms: number, wake: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      wake?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    if (wake?.aborted) done();
    else wake?.addEventListener('abort', done);
  });
}

/**
 * Watches the run until it has been up min_ready_s (healthy, where it has a check) or fails: ended, restarted,
 * removed, unhealthy, or not there by the deadline.
 */
export async function judgeRun(watch: RunWatch): Promise<RunVerdict> {
  let first: CandidateState | undefined;
  for (;;) {
    if (watch.stopped()) return { ok: false, reason: 'the agent stopped' };
    const state = await watch.read();
    if (first === undefined && watch.awaitStart && notStarted(state)) {
      if (watch.now() >= watch.deadlineAtMs) return { ok: false, reason: `it was not up for ${watch.minReadyS} s within ${watch.deadlineS} s (deadline_s)` };
      await pause(watch.everyMs, watch.wake);
      continue;
    }
    first ??= state;
    if (!state.exists) return { ok: false, reason: 'its run was removed' };
    if (!state.running || state.restarts > first.restarts || state.startedAtMs !== first.startedAtMs) {
      return { ok: false, reason: await watch.endReason(first, state) };
    }
    if (state.health === 'unhealthy') return { ok: false, reason: 'its health check failed' };
    const upMs = watch.now() - (state.startedAtMs ?? watch.now());
    if (upMs >= watch.minReadyS * 1000 && (state.health === 'healthy' || state.health === 'none')) return { ok: true };
    if (watch.now() >= watch.deadlineAtMs) {
      return { ok: false, reason: `it was not up${state.health === 'starting' ? ' and healthy' : ''} for ${watch.minReadyS} s within ${watch.deadlineS} s (deadline_s)` };
    }
    await pause(watch.everyMs, watch.wake);
  }
}

function notStarted(state: CandidateState): boolean {
  return state.exists && !state.running && state.startedAtMs === undefined && state.exitCode === null;
}

/**
 * The exit record of the run that began at `startedAtMs`, once the history keeps it: a moment after the run ends,
 * up to 10 s on a busy host, where the record waits for the run's last lines (a run that wrote 800 KB took more
 * than 2 s); undefined past that.
 */
export async function exitOfRun(history: ExitReader, botId: string, startedAtMs: number | undefined): Promise<ExitRecord | undefined> {
  if (startedAtMs === undefined) return undefined;
  for (let tries = 0; tries < 50; tries += 1) {
    // Not the newest alone: the run it replaced (stopped as `<id>.undo`) may be recorded after it.
    const ended = (await history.exits(botId, 5).catch(() => [])).filter((exit) => exit.started_at !== null && Date.parse(exit.started_at) >= startedAtMs);
    if (ended.length > 0) return ended.at(-1);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return undefined;
}

/** Why a run is over, as its exit record (else the runtime's state) says. */
export async function endReasonOf(history: ExitReader, botId: string, first: CandidateState, state: CandidateState): Promise<string> {
  return (await endOf(history, botId, first, state)).reason;
}

/** Why a run is over, and whether it was ended on request (a restart or a stop), as its exit record says. */
export async function endOf(history: ExitReader, botId: string, first: CandidateState, state: CandidateState): Promise<{ reason: string; requested: boolean }> {
  const ended = await exitOfRun(history, botId, first.startedAtMs);
  const exitCode = ended?.exit_code ?? (state.running ? null : state.exitCode);
  const reason = exitCode !== null ? `its run exited with code ${exitCode}` : ended !== undefined ? 'its run ended' : 'its run restarted';
  return { reason, requested: ended?.requested ?? false };
}

/** A bot's run judged by what the runtime shows of it and its exit records (a restored bot's, docs/api.md §20). */
export function runJudge(runtime: Pick<RevisionRuntime, 'candidate'>, history: ExitReader, everyMs = 500) {
  return (botId: string, ask: { readonly minReadyS: number; readonly deadlineS: number }): Promise<RunVerdict> =>
    judgeRun({
      read: () => runtime.candidate(botId),
      endReason: (first, state) => endReasonOf(history, botId, first, state),
      minReadyS: ask.minReadyS,
      deadlineS: ask.deadlineS,
      deadlineAtMs: Date.now() + ask.deadlineS * 1000,
      now: Date.now,
      everyMs,
      stopped: () => false,
    });
}
