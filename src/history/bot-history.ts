import type { BotInfo, RunEnd, RunObserver, RunStart } from '../runtime/driver.js';
import { signalName } from '../runtime/signal-names.js';
import { CRASH_WINDOW_MS, isCrashLooping, RECOVER_AFTER_MS, recoversAt } from './crash-loop.js';
import type { ExitRecord, HistoryStore, StoredEvent } from './history-store.js';

const HOUR_MS = 3_600_000;
/** How many kept events one read of the store hands to a stream that resumes. */
const REPLAY_PAGE = 500;

/** What a bot's records say of it at one time (CONTRACT.md §8). */
export interface BotRecord {
  readonly lastExit: ExitRecord | null;
  readonly crashLooping: boolean;
  readonly crashesLastHour: number;
}

/** Who asked for a lifecycle operation, as the `operation` event says. */
export type OperationCaller = 'bot' | 'platform';

export interface BotHistoryOptions {
  /** How long a crash-looping bot must run without crashing to recover; tests shorten it. */
  readonly recoverAfterMs?: number;
  /** Called with each event once it is kept, e.g. to queue its webhook delivery. */
  readonly onKept?: (event: StoredEvent) => void;
  /** Where faults of the history's own work are reported. */
  readonly report?: (what: string, err: unknown) => void;
}

/** The signal whose number is `exitCode - 128`, as a shell reports it. */
export function signalOf(exitCode: number | null): string | null {
  if (exitCode === null || exitCode <= 128 || exitCode > 128 + 64) return null;
  return signalName(exitCode - 128) ?? null;
}

/**
 * Why bots died and what happened to them: turns the runtime's run starts and
 * ends into exit records, crash-loop states and events (CONTRACT.md §§8-9),
 * keeps them in the store, and hands each event to those who follow.
 */
export class BotHistory implements RunObserver {
  private readonly followers = new Set<(event: StoredEvent) => void>();
  private readonly recoveries = new Map<string, NodeJS.Timeout>();
  /** Current runs as the runtime reported them, for the recovery check. */
  private readonly runs = new Map<string, number>();
  private readonly recoverAfterMs: number;
  private closed = false;

  constructor(
    private readonly store: HistoryStore,
    private readonly botInfo: (botId: string) => Promise<BotInfo>,
    private readonly options: BotHistoryOptions = {},
  ) {
    this.recoverAfterMs = options.recoverAfterMs ?? RECOVER_AFTER_MS;
    // Bots that were crash-looping when the agent stopped are checked again.
    for (const botId of store.crashLoopingBots()) void this.checkRecovery(botId);
  }

  /** Calls `follower` with every event kept from now on; returns the function that stops it. */
  follow(follower: (event: StoredEvent) => void): () => void {
    this.followers.add(follower);
    return () => this.followers.delete(follower);
  }

  /** Kept events after the cursor `seq`, oldest first, of one bot or all, in pages. */
  *eventsAfter(seq: number, botId: string | undefined): Generator<StoredEvent> {
    for (let after = seq; ; ) {
      const page = this.store.eventsAfter(after, botId, REPLAY_PAGE);
      yield* page;
      if (page.length < REPLAY_PAGE) return;
      after = page[page.length - 1]?.seq ?? after;
    }
  }

  /** The time the newest run event was seen, where a runtime can replay what came after. */
  lastSeen(): Date | undefined {
    const ms = this.store.lastRunEventMs();
    return ms === undefined ? undefined : new Date(ms);
  }

  lastEnd(botId: string): Date | undefined {
    const at = this.store.exits(botId, 1)[0]?.at;
    return at === undefined ? undefined : new Date(at);
  }

  started(run: RunStart): void {
    this.guard('a run start', () => {
      if (this.isForgotten(run.botId, run.startedAt)) return;
      this.runs.set(run.botId, run.startedAt.getTime());
      const startedAt = run.startedAt.toISOString();
      this.store.transaction(() => this.append(run.botId, 'started', run.startedAt, { started_at: startedAt }, run.key));
      if (this.store.isCrashLooping(run.botId)) void this.checkRecovery(run.botId);
    });
  }

  ended(run: RunEnd): void {
    this.guard('a run end', () => {
      if (this.isForgotten(run.botId, run.startedAt ?? run.at)) return;
      if (this.runs.get(run.botId) === run.startedAt?.getTime() || !run.startedAt) this.runs.delete(run.botId);
      const record: ExitRecord = {
        at: run.at.toISOString(),
        exit_code: run.exitCode,
        signal: run.signal ?? signalOf(run.exitCode),
        oom_killed: run.oomKilled,
        requested: run.requested && !run.oomKilled,
        started_at: run.startedAt?.toISOString() ?? null,
        logs: run.logs,
      };
      this.store.transaction(() => {
        if (!this.store.addExit(run.botId, record, run.key)) return;
        const { logs: _logs, ...exit } = record;
        this.append(run.botId, 'exited', run.at, { exit }, run.key);
        if (record.requested) return;
        const crashes = this.store.crashesSince(run.botId, run.at.getTime() - CRASH_WINDOW_MS);
        if (this.store.isCrashLooping(run.botId) || !isCrashLooping(crashes, run.at.getTime())) return;
        this.store.setCrashLoop(run.botId, run.at.getTime());
        this.append(run.botId, 'crash-looping', run.at, { crashes: crashes.length, window_s: CRASH_WINDOW_MS / 1000 });
      });
    });
  }

  /** A lifecycle operation through the agent ended; a stop ends a crash loop. */
  operationEnded(botId: string, operation: 'restart' | 'stop' | 'start', result: string, by: OperationCaller): void {
    this.guard('an operation', () => {
      const now = new Date();
      this.store.transaction(() => {
        this.append(botId, 'operation', now, { operation, result, by });
        if (operation === 'stop' && result === 'ok') this.recover(botId, now);
      });
    });
  }

  /** The bot's last exit, crash-loop state and crashes in the hour before `now`. */
  record(botId: string, now: Date): BotRecord {
    return {
      lastExit: this.store.exits(botId, 1)[0] ?? null,
      crashLooping: this.store.isCrashLooping(botId),
      crashesLastHour: this.store.crashesSince(botId, now.getTime() - HOUR_MS).length,
    };
  }

  exits(botId: string, limit: number): ExitRecord[] {
    return this.store.exits(botId, limit);
  }

  /**
   * Forgets the bot (it was removed): its records, events and crash-loop state
   * go, and runs that began before now are not recorded when they are reported
   * late, so that a bot created later under the same id starts with none.
   */
  forget(botId: string): void {
    clearTimeout(this.recoveries.get(botId));
    this.recoveries.delete(botId);
    this.runs.delete(botId);
    this.store.transaction(() => this.store.forget(botId, Date.now()));
  }

  close(): void {
    this.closed = true;
    for (const timer of this.recoveries.values()) clearTimeout(timer);
    this.recoveries.clear();
    this.followers.clear();
  }

  /**
   * Recovers a crash-looping bot that has run long enough without crashing,
   * else checks again when it will have; a bot that does not run waits for its next start.
   */
  private async checkRecovery(botId: string): Promise<void> {
    clearTimeout(this.recoveries.get(botId));
    this.recoveries.delete(botId);
    if (this.closed || !this.store.isCrashLooping(botId)) return;
    let runStartedMs = this.runs.get(botId);
    if (runStartedMs === undefined) {
      const info = await this.botInfo(botId).catch(() => undefined);
      runStartedMs = info?.running ? info.startedAt?.getTime() : undefined;
    }
    const lastCrash = this.store.crashesSince(botId, 0).at(-1);
    const at = recoversAt(lastCrash, runStartedMs, this.recoverAfterMs);
    if (at === undefined || this.closed) return;
    const now = Date.now();
    if (at <= now) {
      this.guard('a recovery', () => this.store.transaction(() => this.recover(botId, new Date(now))));
      return;
    }
    this.recoveries.set(botId, setTimeout(() => void this.checkRecovery(botId), at - now + 50).unref());
  }

  private recover(botId: string, at: Date): void {
    if (!this.store.isCrashLooping(botId)) return;
    this.store.setCrashLoop(botId, undefined);
    this.append(botId, 'recovered', at, {});
  }

  /** Keeps one event and hands it to the followers once the transaction it is in has been committed. */
  private append(botId: string, type: string, at: Date, fields: Record<string, unknown>, runKey?: string): void {
    const event = this.store.appendEvent(
      botId,
      type,
      at.getTime(),
      (id) => JSON.stringify({ id, type, bot_id: botId, at: at.toISOString(), ...fields }),
      runKey === undefined ? undefined : `${type}:${runKey}`,
    );
    if (!event) return;
    this.options.onKept?.(event);
    queueMicrotask(() => {
      for (const follower of this.followers) follower(event);
    });
  }

  /** Whether the bot was removed after a run that began at `began`: that run was the removed bot's. */
  private isForgotten(botId: string, began: Date): boolean {
    const at = this.store.forgottenAt(botId);
    return at !== undefined && began.getTime() <= at;
  }

  private guard(what: string, work: () => void): void {
    try {
      work();
    } catch (err) {
      this.options.report?.(`the history could not keep ${what}`, err);
    }
  }
}

