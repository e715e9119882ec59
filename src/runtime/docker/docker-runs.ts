import type { FaultReporter, RunObserver } from '../driver.js';
import { BOT_LABEL } from '../labels.js';
import type { ContainerInspectInfo } from 'dockerode';
import { mapLimited } from '../../map-limited.js';
import type { EngineEvent, IndexedBot } from './docker-bot-index.js';
import { dockerHealthPolicy } from './docker-policy.js';
import { UNDO_SUFFIX } from './docker-revisions.js';

/** The events of a run's end: what a run renamed `<id>.undo` is still followed for. */
const ENDS = new Set(['kill', 'oom', 'die', 'destroy']);

/** What the engine said of a container's current run before it ended. */
interface Run {
  startedAt: Date | undefined;
  /** When the previous run ended: this run's lines are those after it. */
  after: Date | undefined;
  /** A kill (docker stop, restart, kill, rm -f: the agent's too) came before the end. */
  requested: boolean;
  oomKilled: boolean;
  /** Called when the kernel's kill for memory is reported after the run's end. */
  onLateOom?: () => void;
}

/**
 * How long a SIGKILL nobody asked for waits for the engine's word that it was for memory: containerd hears the
 * kill and the exit apart, and under load the word came more than 2 s late, then more than 5 s (busy rehearsals'
 * records said no).
 */
const LATE_OOM_WAIT_MS = 10_000;

/** How many containers `recover` inspects at once. */
const RECOVER_AT_ONCE = 4;

/** How long after the agent's stop of a container returned a run's end still counts as the stop's: the engine tells of it a moment after its waiters. */
const STOP_SETTLE_MS = 1_000;

/** The lines of a run an exit record keeps. */
export const EXIT_LOG_LINES = 100;

/** When the container's current run started and its previous one ended, as the engine recorded them. */
export type RunStartReader = (containerId: string) => Promise<Date | undefined>;

/** Reads the last lines a container wrote after one time and up to another; '' when they cannot be had. */
export type RunLogsReader = (botId: string, containerId: string, since: Date | undefined, until: Date) => Promise<string>;

/**
 * Turns the engine's container events into run starts and ends of bots: a
 * `start` begins a run; `kill` (any stop, restart, kill or removal through the
 * engine) and `oom` say how the run is ending; `die` ends it, with its exit
 * code. The run's last lines are read with an `until` of the end, so a restart
 * that follows at once (a restart policy) cannot mix its lines in. A
 * container's events are handed on in order, each end after its lines were read.
 */
export class DockerRunWatcher {
  private readonly runs = new Map<string, Run>();
  /** Runs that ended and whose records are not yet handed on. */
  private readonly ending = new Map<string, Run>();
  /** When each container's last run ended. */
  private readonly ends = new Map<string, Date>();
  /** The bot of each container in `runs` or `ends`. */
  private readonly bots = new Map<string, string>();
  private readonly queues = new Map<string, Promise<void>>();
  /** The agent's stops of each container under way, or ended within STOP_SETTLE_MS: from when, until when (ms). */
  private readonly stops = new Map<string, { fromMs: number; untilMs: number }[]>();

  constructor(
    private readonly observer: RunObserver,
    private readonly lastLines: RunLogsReader,
    private readonly startOf: RunStartReader,
    private readonly report: FaultReporter,
    /** A run of the bot ended with no request: what the engine does next is the agent's to change (docs/api.md §13). */
    private readonly onCrash: (botId: string, labels: Readonly<Record<string, string>>) => void = () => {},
  ) {}

  /**
   * The agent stops the container: a run that ends meanwhile (or just after) ended on request, kill event or
   * not. The engine sends none when the stop finds the container between two runs of its restart policy,
   * and the run it was just beginning then may end on its own: that is not a crash after the stop.
   * Returns what to call once the stop has ended.
   */
  stopping(containerId: string): () => void {
    const stop = { fromMs: Date.now(), untilMs: Number.POSITIVE_INFINITY };
    this.stops.set(containerId, [...(this.stops.get(containerId) ?? []), stop]);
    return () => {
      stop.untilMs = Date.now() + STOP_SETTLE_MS;
      setTimeout(() => {
        const left = (this.stops.get(containerId) ?? []).filter((other) => other !== stop);
        if (left.length === 0) this.stops.delete(containerId);
        else this.stops.set(containerId, left);
      }, STOP_SETTLE_MS + 60_000).unref();
    };
  }

  private stoppedAt(containerId: string, atMs: number): boolean {
    return (this.stops.get(containerId) ?? []).some((stop) => atMs >= stop.fromMs && atMs <= stop.untilMs);
  }

  onEvent(event: EngineEvent): void {
    const containerId = event.Actor?.ID;
    const attributes = event.Actor?.Attributes ?? {};
    const botId = attributes[BOT_LABEL];
    // A bot is the container named by its id that carries its label (docs/api.md §1); a deploy or rollback renames
    // the run it replaces `<id>.undo` before it stops it, and that run's end is the bot's too (docs/api.md §8).
    if (event.Type !== 'container' || !containerId || !botId) return;
    if (attributes.name !== botId && !(attributes.name === `${botId}${UNDO_SUFFIX}` && ENDS.has(event.Action ?? ''))) return;
    // Rounded: nanoseconds since the epoch are past a double's exact integers, and a millisecond read as x.9999
    // would fall before a stop begun in that millisecond.
    const at = new Date(event.timeNano !== undefined ? Math.round(event.timeNano / 1e6) : Date.now());
    const key = `docker:${containerId}:${event.timeNano ?? at.getTime()}`;
    if (event.Action === 'start' || event.Action === 'die') this.bots.set(containerId, botId);
    switch (event.Action) {
      case 'start': {
        const run: Run = { startedAt: at, after: this.previousEnd(containerId), requested: false, oomKilled: false };
        this.runs.set(containerId, run);
        // The event comes a little after the process began: the engine's own start time is closer.
        this.inOrder(containerId, async () => {
          const recorded = await this.startOf(containerId);
          // The engine records a start before it announces it: a recorded start later than the event is a
          // later run (this one has ended and the container started again before the look-up).
          if (recorded && recorded.getTime() <= at.getTime() && at.getTime() - recorded.getTime() < 60_000) run.startedAt = recorded;
          await this.observer.started({ botId, startedAt: run.startedAt ?? at, key });
        });
        return;
      }
      case 'kill':
        this.runOf(containerId).requested = true;
        return;
      case 'oom': {
        // The engine hears of the kill for memory and of the exit apart: under load, the exit may come first.
        const run = this.ending.get(containerId) ?? this.runOf(containerId);
        run.oomKilled = true;
        run.onLateOom?.();
        return;
      }
      case 'die': {
        const run = this.runOf(containerId);
        if (this.stoppedAt(containerId, at.getTime())) run.requested = true;
        if (!run.requested) this.onCrash(botId, attributes);
        this.runs.delete(containerId);
        this.ending.set(containerId, run);
        this.ends.set(containerId, at);
        const exitCode = Number.parseInt(attributes.exitCode ?? '', 10);
        // A run the agent did not see begin: the engine says how long it lasted, in whole seconds.
        const duration = Number.parseInt(attributes.execDuration ?? '', 10);
        this.inOrder(containerId, async () => {
          const startedAt = run.startedAt ?? (Number.isFinite(duration) ? new Date(at.getTime() - duration * 1000) : undefined);
          const after = run.after ?? (await this.observer.lastEnd(botId));
          const logs = await this.lastLines(botId, containerId, after, at);
          if (exitCode === 137 && !run.requested && !run.oomKilled) await lateOom(run);
          if (this.ending.get(containerId) === run) this.ending.delete(containerId);
          await this.observer.ended({
            botId,
            at,
            exitCode: Number.isFinite(exitCode) ? exitCode : null,
            oomKilled: run.oomKilled,
            requested: run.requested,
            startedAt,
            logs,
            restartPolicy: dockerHealthPolicy(attributes).restart ?? null,
            key,
          });
        });
        return;
      }
      case 'destroy':
        this.forget(containerId);
        return;
    }
  }

  /**
   * After the engine's event stream was opened again and the index listed: a run whose end, or a start, the
   * replay did not bring (the engine keeps only its last 256 events or so; a busy one sends more while the
   * stream is down) is ended and started as the engine recorded them, so that the run's exit record is taken
   * all the same (docs/api.md §8). Runs between the two the engine no longer describes are not known.
   */
  async recover(indexed: (botId: string) => IndexedBot | undefined, inspect: (containerId: string) => Promise<ContainerInspectInfo | undefined>): Promise<void> {
    const lost = [...this.bots].filter(([containerId, botId]) => {
      const now = indexed(botId);
      // Removed while the stream was down: its destroy went to nobody, and its runs' ends cannot be had any more.
      if (now?.containerId !== containerId) {
        this.forget(containerId);
        return false;
      }
      const runStart = this.runs.get(containerId)?.startedAt?.getTime();
      // A run under way as seen here, still under way as listed; or the last run seen ended, and none began since.
      if (runStart !== undefined) return !now.running || (now.startedAt?.getTime() ?? 0) > runStart;
      return now.running && this.startedSinceEnd(containerId, now.startedAt?.getTime() ?? 0);
    });
    await mapLimited(lost, RECOVER_AT_ONCE, async ([containerId, botId]) => {
      const run = this.runs.get(containerId);
      const end = this.ends.get(containerId);
      // Another agent over this engine that kept its stream may have recorded the end, under its event's key (docs/api.md §11):
      // asked only where a run was under way here, the one such an end could be of.
      const [info, recorded] = await Promise.all([inspect(containerId), run?.startedAt === undefined ? undefined : this.observer.lastEnd(botId)]);
      // An event of it came meanwhile (its replay was late): it says the rest.
      if (!info || this.runs.get(containerId) !== run || this.ends.get(containerId) !== end) return;
      // The engine forgets the exit code as it starts the container again: then the record says none (docs/api.md §8).
      const attributes = { ...info.Config.Labels, name: info.Name.replace(/^\//, ''), ...(info.State.Running ? {} : { exitCode: String(info.State.ExitCode) }) };
      const told = (Action: string, at: string): EngineEvent => ({ Type: 'container', Action, Actor: { ID: containerId, Attributes: attributes }, timeNano: Date.parse(at) * 1e6 });
      const finishedMs = Date.parse(info.State.FinishedAt);
      const runStart = run?.startedAt?.getTime();
      // Then it heard the start that followed too. Agents that all missed them tell the same times, so the same keys.
      const heardElsewhere = runStart !== undefined && recorded !== undefined && recorded.getTime() >= runStart;
      if (runStart !== undefined && finishedMs >= runStart) {
        if (heardElsewhere) {
          this.runs.delete(containerId);
          this.ends.set(containerId, new Date(finishedMs));
        } else {
          if (info.State.OOMKilled) this.onEvent(told('oom', info.State.FinishedAt));
          this.onEvent(told('die', info.State.FinishedAt));
        }
      }
      if (info.State.Running && this.startedSinceEnd(containerId, Date.parse(info.State.StartedAt))) {
        // Heard elsewhere: the run is this watcher's to follow from here, its start kept already.
        if (heardElsewhere) this.runs.set(containerId, { startedAt: new Date(info.State.StartedAt), after: this.previousEnd(containerId), requested: false, oomKilled: false });
        else this.onEvent(told('start', info.State.StartedAt));
      }
    });
  }

  /** Whether a start at `startMs` came after the container's last run end seen here (false with none seen). */
  private startedSinceEnd(containerId: string, startMs: number): boolean {
    const end = this.ends.get(containerId);
    return end !== undefined && startMs > end.getTime();
  }

  private forget(containerId: string): void {
    this.runs.delete(containerId);
    this.ending.delete(containerId);
    this.ends.delete(containerId);
    this.bots.delete(containerId);
  }

  /**
   * Where a run's lines begin: after the container's previous run, as seen
   * here; else (the agent's first run of this container, or a bot's first run)
   * what the history recorded, read when the run ends. Not the run's start: a
   * process may write before the engine records that.
   */
  private previousEnd(containerId: string): Date | undefined {
    return this.ends.get(containerId);
  }

  private runOf(containerId: string): Run {
    let run = this.runs.get(containerId);
    if (!run) {
      run = { startedAt: undefined, after: this.previousEnd(containerId), requested: false, oomKilled: false };
      this.runs.set(containerId, run);
    }
    return run;
  }

  private inOrder(containerId: string, work: () => Promise<void>): void {
    const next = (this.queues.get(containerId) ?? Promise.resolve())
      .then(work)
      .catch((err: unknown) => this.report('a bot run the agent could not record', err))
      .finally(() => {
        if (this.queues.get(containerId) === next) this.queues.delete(containerId);
      });
    this.queues.set(containerId, next);
  }
}

/** Resolves when the run's kill for memory is reported, or after a short wait. */
function lateOom(run: Run): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, LATE_OOM_WAIT_MS);
    run.onLateOom = () => {
      clearTimeout(timer);
      resolve();
    };
  });
}
