import type { BotInfo, RunEnd, RunObserver, RunStart } from '../runtime/driver.js';
import { signalName } from '../runtime/signal-names.js';
import { CRASH_WINDOW_MS, isCrashLooping, RECOVER_AFTER_MS, recoversAt } from './crash-loop.js';
import { HOUR_MS } from './history-store.js';
import type { ExitRecord, HistoryStore, HistoryTx, StoredEvent } from './history-store.js';

/** How many kept events one read of the store hands to a stream that resumes. */
const REPLAY_PAGE = 500;
/**
 * How far before the newest run event kept a runtime replays from: runs are kept out of order (an exit
 * waits for its run's last lines, seconds on a busy engine, while other bots' events are kept), so an
 * agent killed meanwhile leaves an older run unkept behind a newer one. What is replayed twice is kept once (run keys).
 */
const REPLAY_MARGIN_MS = 60_000;

/** What a bot's records say of it at one time (docs/api.md §8). */
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
  /** Queue a webhook delivery of each event, in the transaction that keeps it. */
  readonly deliver?: boolean;
  /** Called with each event this agent kept, once it is committed (e.g. to count it). */
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
 * ends into exit records, crash-loop states and events (docs/api.md §§8-9),
 * keeps them in the store, and hands each event, whichever agent kept it, to
 * those who follow. The runtime's reports are kept one after another, in the
 * order they came.
 */
export class BotHistory implements RunObserver {
  private readonly followers = new Set<(event: StoredEvent) => void>();
  private readonly recoveries = new Map<string, NodeJS.Timeout>();
  /** Current runs as the runtime reported them, for the recovery check. */
  private readonly runs = new Map<string, number>();
  private readonly recoverAfterMs: number;
  private readonly unsubscribe: () => void;
  /** The end of the last write begun: writes are kept in the order they were asked for. */
  private writes: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly store: HistoryStore,
    private readonly botInfo: (botId: string) => Promise<BotInfo>,
    private readonly options: BotHistoryOptions = {},
  ) {
    this.recoverAfterMs = options.recoverAfterMs ?? RECOVER_AFTER_MS;
    this.unsubscribe = store.subscribe((event) => {
      for (const follower of this.followers) follower(event);
    });
    // Bots that were crash-looping when the agent stopped are checked again.
    void store
      .crashLoopingBots()
      .then((bots) => bots.forEach((botId) => void this.checkRecovery(botId)))
      .catch((err: unknown) => options.report?.('the history could not read crash loops', err));
  }

  /** Calls `follower` with every event kept from now on; returns the function that stops it. */
  follow(follower: (event: StoredEvent) => void): () => void {
    this.followers.add(follower);
    return () => this.followers.delete(follower);
  }

  /** Kept events after the cursor `seq`, oldest first, of one bot or all, in pages. */
  async *eventsAfter(seq: number, botId: string | undefined): AsyncGenerator<StoredEvent> {
    for (let after = seq; ; ) {
      const page = await this.store.eventsAfter(after, botId, REPLAY_PAGE);
      yield* page;
      if (page.length < REPLAY_PAGE) return;
      after = page[page.length - 1]?.seq ?? after;
    }
  }

  /** Where a runtime replays run events from: a margin before the newest one kept (REPLAY_MARGIN_MS). */
  async lastSeen(): Promise<Date | undefined> {
    const ms = await this.store.lastRunEventMs();
    return ms === undefined ? undefined : new Date(ms - REPLAY_MARGIN_MS);
  }

  async lastEnd(botId: string): Promise<Date | undefined> {
    await this.writes;
    const at = (await this.store.exits(botId, 1))[0]?.at;
    return at === undefined ? undefined : new Date(at);
  }

  started(run: RunStart): Promise<void> {
    return this.write('a run start', async () => {
      if (await this.isForgotten(run.botId, run.startedAt)) return;
      this.runs.set(run.botId, run.startedAt.getTime());
      const startedAt = run.startedAt.toISOString();
      await this.keep((tx, kept) => this.append(tx, kept, run.botId, 'started', run.startedAt, { started_at: startedAt }, run.key));
      if (await this.store.isCrashLooping(run.botId)) void this.checkRecovery(run.botId);
    });
  }

  ended(run: RunEnd): Promise<void> {
    return this.write('a run end', async () => {
      if (await this.isForgotten(run.botId, run.startedAt ?? run.at)) return;
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
      await this.keep(async (tx, kept) => {
        if (!(await tx.addExit(run.botId, record, run.key))) return;
        const { logs: _logs, ...exit } = record;
        await this.append(tx, kept, run.botId, 'exited', run.at, { exit }, run.key);
        if (record.requested) return;
        const crashes = await tx.crashesSince(run.botId, run.at.getTime() - CRASH_WINDOW_MS);
        if (!isCrashLooping(crashes, run.at.getTime()) || !(await tx.startCrashLoop(run.botId, run.at.getTime()))) return;
        await this.append(tx, kept, run.botId, 'crash-looping', run.at, { crashes: crashes.length, window_s: CRASH_WINDOW_MS / 1000 });
      });
    });
  }

  /** A lifecycle operation through the agent ended; a stop ends a crash loop. */
  operationEnded(botId: string, operation: 'restart' | 'stop' | 'start', result: string, by: OperationCaller): Promise<void> {
    return this.write('an operation', async () => {
      const now = new Date();
      await this.keep(async (tx, kept) => {
        await this.append(tx, kept, botId, 'operation', now, { operation, result, by });
        if (operation === 'stop' && result === 'ok') await this.recover(tx, kept, botId, now);
      });
    });
  }

  /** The bot's last exit, crash-loop state and crashes in the hour before `now`. */
  async record(botId: string, now: Date): Promise<BotRecord> {
    const [exits, crashLooping, crashes] = await Promise.all([
      this.store.exits(botId, 1),
      this.store.isCrashLooping(botId),
      this.store.crashesSince(botId, now.getTime() - HOUR_MS),
    ]);
    return { lastExit: exits[0] ?? null, crashLooping, crashesLastHour: crashes.length };
  }

  exits(botId: string, limit: number): Promise<ExitRecord[]> {
    return this.store.exits(botId, limit);
  }

  /**
   * Forgets the bot (it was removed): its records, events and crash-loop state
   * go, and runs that began before now are not recorded when they are reported
   * late, so that a bot created later under the same id starts with none.
   */
  async forget(botId: string): Promise<void> {
    clearTimeout(this.recoveries.get(botId));
    this.recoveries.delete(botId);
    this.runs.delete(botId);
    await this.store.forget(botId, Date.now());
  }

  /** Stops following the store; resolves once the writes asked for so far are kept. */
  async close(): Promise<void> {
    this.closed = true;
    for (const timer of this.recoveries.values()) clearTimeout(timer);
    this.recoveries.clear();
    this.followers.clear();
    this.unsubscribe();
    await this.writes;
  }

  /**
   * Recovers a crash-looping bot that has run long enough without crashing,
   * else checks again when it will have; a bot that does not run waits for its next start.
   */
  private async checkRecovery(botId: string): Promise<void> {
    clearTimeout(this.recoveries.get(botId));
    this.recoveries.delete(botId);
    if (this.closed || !(await this.store.isCrashLooping(botId).catch(() => false))) return;
    let runStartedMs = this.runs.get(botId);
    if (runStartedMs === undefined) {
      const info = await this.botInfo(botId).catch(() => undefined);
      runStartedMs = info?.running ? info.startedAt?.getTime() : undefined;
    }
    const lastCrash = (await this.store.crashesSince(botId, 0).catch(() => [])).at(-1);
    const at = recoversAt(lastCrash, runStartedMs, this.recoverAfterMs);
    if (at === undefined || this.closed) return;
    const now = Date.now();
    if (at <= now) {
      await this.write('a recovery', () => this.keep((tx, kept) => this.recover(tx, kept, botId, new Date(now))));
      return;
    }
    this.recoveries.set(botId, setTimeout(() => void this.checkRecovery(botId), at - now + 50).unref());
  }

  private async recover(tx: HistoryTx, kept: StoredEvent[], botId: string, at: Date): Promise<void> {
    // Only the agent that ends the loop says so.
    if (await tx.endCrashLoop(botId)) await this.append(tx, kept, botId, 'recovered', at, {});
  }

  /** Runs `work` in one transaction, then reports the events it kept. */
  private async keep(work: (tx: HistoryTx, kept: StoredEvent[]) => Promise<void>): Promise<void> {
    const kept: StoredEvent[] = [];
    await this.store.transaction((tx) => work(tx, kept));
    for (const event of kept) this.options.onKept?.(event);
  }

  /** Keeps one event, and its webhook delivery, in the transaction `tx`. */
  private async append(
    tx: HistoryTx,
    kept: StoredEvent[],
    botId: string,
    type: string,
    at: Date,
    fields: Record<string, unknown>,
    runKey?: string,
  ): Promise<void> {
    const event = await tx.appendEvent(
      botId,
      type,
      at.getTime(),
      (id) => JSON.stringify({ id, type, bot_id: botId, at: at.toISOString(), ...fields }),
      runKey === undefined ? undefined : `${type}:${runKey}`,
    );
    if (!event) return;
    if (this.options.deliver) await tx.addDelivery(event, Date.now());
    kept.push(event);
  }

  /** Whether the bot was removed after a run that began at `began`: that run was the removed bot's. */
  private async isForgotten(botId: string, began: Date): Promise<boolean> {
    const at = await this.store.forgottenAt(botId);
    return at !== undefined && began.getTime() <= at;
  }

  /** Runs `work` after the writes asked for before it; a fault is reported, not thrown. */
  private write(what: string, work: () => Promise<void>): Promise<void> {
    const next = this.writes.then(work).catch((err: unknown) => this.options.report?.(`the history could not keep ${what}`, err));
    this.writes = next;
    return next;
  }
}
