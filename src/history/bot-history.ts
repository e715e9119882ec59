import { randomBytes, randomUUID } from 'node:crypto';
import { HistoryUnavailable } from '../errors.js';
import type { BotInfo, RestartPolicy, RunEnd, RunObserver, RunStart } from '../runtime/driver.js';
import { signalName } from '../runtime/signal-names.js';
import type { SharedState } from '../shared/shared-state.js';
import { CRASH_WINDOW_MS, isCrashLooping, RECOVER_AFTER_MS, recoversAt } from './crash-loop.js';
import { HistorySpool } from './history-spool.js';
import { RecordCache } from './record-cache.js';
import { ChatSeal } from '../secrets/chat-seal.js';
import { givenUpHolds, HOUR_MS } from './history-store.js';
import type { ExitRecord, HistoryStore, HistoryTx, RevisionRecord, StoredEvent, UnhealthyEnd } from './history-store.js';

/** What a read of the history answers while its store is away. */
const HISTORY_AWAY = "the history's database does not answer: status and exit records wait for it (restart, stop, start, logs and stats still answer)";
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
  /** The agent gave up on the bot under its restart policy (docs/api.md §13), and it was not started through the agent since. */
  readonly givenUp: boolean;
}

/** Who asked for a lifecycle operation, as the `operation` event says. */
export type OperationCaller = 'bot' | 'platform';

/** A write the history owes its store, as data: what the spool keeps while the store is away. */
export type HistoryWrite =
  | { readonly kind: 'started'; readonly botId: string; readonly key: string; readonly startedAtMs: number }
  | {
      readonly kind: 'ended';
      readonly botId: string;
      readonly key: string;
      readonly atMs: number;
      readonly exitCode: number | null;
      readonly signal: string | null;
      readonly oomKilled: boolean;
      readonly requested: boolean;
      readonly startedAtMs: number | null;
      readonly logs: string;
      /** The runtime ended it for its health (the kubelet's liveness probe); absent in writes spooled before there was such a field. */
      readonly unhealthy?: UnhealthyEnd | null;
      /** The bot's restart policy as the runtime told it with the end (null: none); absent: asked of the runtime. */
      readonly restartPolicy?: RestartPolicy | null;
    }
  | {
      readonly kind: 'unhealthy';
      readonly botId: string;
      /** Its event's key: every agent that sees the bot turn unhealthy names it alike, so it is kept once. */
      readonly key: string;
      readonly atMs: number;
      readonly check: UnhealthyEnd['check'];
      readonly output: string | null;
    }
  | {
      readonly kind: 'operation';
      /** Its event's key: a write replayed after a crash between the store's commit and the spool's count is kept once. */
      readonly id: string;
      readonly botId: string;
      readonly operation: 'restart' | 'stop' | 'start';
      readonly result: string;
      readonly by: OperationCaller;
      readonly atMs: number;
    }
  | {
      /** An event of the agent's own doing, such as a pull's (docs/api.md §9): kept as it is told. */
      readonly kind: 'event';
      /** Its key: kept once, whatever replays it. */
      readonly id: string;
      readonly botId: string;
      readonly type: string;
      readonly fields: Readonly<Record<string, unknown>>;
      readonly atMs: number;
    }
  | {
      /** A revision made, or its new outcome, with the event that tells it (docs/api.md §15). */
      readonly kind: 'revision';
      readonly id: string;
      readonly botId: string;
      readonly record: RevisionRecord;
      readonly event: { readonly type: string; readonly fields: Readonly<Record<string, unknown>> } | undefined;
      readonly atMs: number;
    }
  | { readonly kind: 'recovery'; readonly botId: string; readonly atMs: number }
  | { readonly kind: 'forgotten'; readonly botId: string; readonly atMs: number }
  | { readonly kind: 'session-ended'; readonly nonce: string; readonly untilMs: number };

/** What each kind of write keeps, as a log line says it. */
const WHAT: Record<HistoryWrite['kind'], string> = {
  started: 'a run start',
  ended: 'a run end',
  unhealthy: "a bot's turn to unhealthy",
  operation: 'an operation',
  event: 'an event',
  revision: 'a revision',
  recovery: 'a recovery',
  forgotten: "a bot's removal",
  'session-ended': "a console session's end",
};
/** How long a crash's record waits for the runtime to say the bot's restart policy. */
const POLICY_READ_MS = 2_000;

/** What `promise` resolves to within `ms`; undefined past it, or when it rejects. */
async function within<T>(ms: number, promise: Promise<T>): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)));
  try {
    return await Promise.race([promise.catch(() => undefined), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The most writes one transaction keeps: a batch holds the store's event counter (PostgreSQL) for milliseconds, never for seconds. */
const BATCH_MAX = 100;
/** A write with nothing to keep: its bot was removed after the run it tells of. */
const SKIP = Symbol('skip');

/** How often the spool is tried again while the store is away. */
const SPOOL_RETRY_MS = 1_000;
/** The most the spool holds (JSON bytes, on disk and in memory): at 64 KiB of logs an exit, 512 exits or far more events. */
export const SPOOL_MAX_BYTES = 32 * 1024 * 1024;

/**
 * A crash this agent is to restart (docs/api.md §13): the bot held stopped until `untilMs`, then started. The first
 * crash in the window waits nothing and has no event: it is the runtime's to restart, unless the agent took the
 * bot's restarts from it already (Docker).
 */
export interface BackOff {
  readonly botId: string;
  readonly untilMs: number;
  /** Its `backing-off` event, which holds while it is the bot's latest of BACK_OFF_ENDERS; none for a first crash. */
  readonly seq: number | undefined;
  /** When the crash happened: a start with nothing left to wait for is for that run's end alone, not a later one's (whose record decides). */
  readonly crashAtMs?: number;
}

/** The events after which a crash back-off is over: an operation asked for, a give-up, a deploy (the runtime's own restart of the crashed run is not one: the back-off stops that run). */
export const BACK_OFF_ENDERS = ['backing-off', 'operation', 'given-up', 'deploy-started', 'rolled-back'] as const;
/** Those of BACK_OFF_ENDERS that leave a crash no back-off when kept at or after it (a stop that ended after the crash it found). */
const CRASH_ENDERS = BACK_OFF_ENDERS.filter((type) => type !== 'backing-off');
const DAY_MS = 86_400_000;

export interface BotHistoryOptions {
  /** How long a crash-looping bot must run without crashing to recover; tests shorten it. */
  readonly recoverAfterMs?: number;
  /** Queue a webhook delivery of each event, in the transaction that keeps it (those of bots with chats of their own always). */
  readonly deliver?: boolean;
  /** Called with each event this agent kept, once it is committed (e.g. to count it). */
  readonly onKept?: (event: StoredEvent) => void;
  /** This agent gave up on the bot under its restart policy (docs/api.md §13): the bot is to be stopped. */
  readonly onGivenUp?: (botId: string) => void;
  /**
   * This agent kept the bot's crash back-off (docs/api.md §13): the bot is to be held stopped until `untilMs`,
   * then started, unless its event is no longer pending (a start, stop or restart through the agent, a give-up
   * or a deploy came since).
   */
  readonly onBackingOff?: ((backOff: BackOff) => void) | undefined;
  /** The bots whose crashes back off (with onBackingOff); all when undefined. */
  readonly backsOff?: (botId: string) => boolean;
  /** Where faults of the history's own work are reported. */
  readonly report?: (what: string, err: unknown) => void;
  /** Where the spool of writes waiting for the store is kept (AGENT_DATA_DIR); in memory when undefined. */
  readonly spoolDir?: string | undefined;
  /** How often the spool is tried again while the store is away; tests shorten it. */
  readonly spoolRetryMs?: number;
  /** This agent's node (docs/api.md §17), named in each event it keeps; none: events name no node. */
  readonly node?: string;
  /** Seals the bots' own chats before the store keeps them (docs/api.md §16); a key of this history's own when undefined. */
  readonly chatSeal?: ChatSeal;
}

/** The signal whose number is `exitCode - 128`, as a shell reports it. */
export function signalOf(exitCode: number | null): string | null {
  if (exitCode === null || exitCode <= 128 || exitCode > 128 + 64) return null;
  return signalName(exitCode - 128) ?? null;
}

/** A write asked for and not yet kept, with what to tell its caller: kept (or refused for good), or not even spooled. */
interface QueuedWrite {
  readonly write: HistoryWrite;
  readonly done: (kept: boolean) => void;
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
  /** The records status reads took lately, until the bot's next event or write. */
  private readonly records = new RecordCache();
  /** Writes asked for and not yet begun, each with what its caller waits on (false: lost, the spool full). */
  private readonly queued: QueuedWrite[] = [];
  private drainAsked = false;
  /** The writes that wait for the store to answer again, in order. */
  readonly spool: HistorySpool<HistoryWrite>;
  /** The newest run end, and the removal, of each bot that wait in the spool (cleared once the spool is written). */
  private readonly spooledEnds = new Map<string, number>();
  private readonly spooledRemovals = new Map<string, number>();
  /**
   * Console sessions ended while the store was away (with when they would have expired), this agent's or
   * an earlier start's found in the spool: kept until they expire, so a sign-out holds across a restart
   * in an outage and until the shared state has read it from the store.
   */
  private readonly spooledSessionEnds = new Map<string, number>();
  private spoolRetry: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly chatSeal: ChatSeal;

  constructor(
    private readonly store: HistoryStore,
    /** When bots were removed and which console sessions were ended, shared with the other agents. */
    private readonly shared: SharedState,
    private readonly botInfo: (botId: string) => Promise<BotInfo>,
    private readonly options: BotHistoryOptions = {},
  ) {
    this.chatSeal = options.chatSeal ?? new ChatSeal(randomBytes(32));
    this.recoverAfterMs = options.recoverAfterMs ?? RECOVER_AFTER_MS;
    // Each bot's writes are a share of their own: no bot fills the spool for the others, or for removals and sign-outs.
    this.spool = new HistorySpool(options.spoolDir, SPOOL_MAX_BYTES, options.report, (write) => (write.kind === 'forgotten' || write.kind === 'session-ended' ? undefined : write.botId));
    // What an agent stopped during an outage left waiting is written before anything new.
    for (const write of this.spool.waiting()) this.noteSpooled(write);
    if (this.spool.size > 0) this.retrySpoolSoon(0);
    this.unsubscribe = store.subscribe((event) => {
      this.records.changed(event.botId);
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

  /** When the bot's last run ended as far as the history knows: the spool first, then the store (undefined while it is away). */
  async lastEnd(botId: string): Promise<Date | undefined> {
    await this.writes;
    const spooled = this.spooledEnds.get(botId);
    if (spooled !== undefined) return new Date(spooled);
    const at = (await this.store.exits(botId, 1).catch(() => []))[0]?.at;
    return at === undefined ? undefined : new Date(at);
  }

  async started(run: RunStart): Promise<void> {
    await this.write({ kind: 'started', botId: run.botId, key: run.key, startedAtMs: run.startedAt.getTime() });
  }

  async ended(run: RunEnd): Promise<void> {
    await this.write({
      kind: 'ended',
      botId: run.botId,
      key: run.key,
      atMs: run.at.getTime(),
      exitCode: run.exitCode,
      signal: run.signal ?? null,
      oomKilled: run.oomKilled,
      requested: run.requested,
      startedAtMs: run.startedAt?.getTime() ?? null,
      logs: run.logs,
      unhealthy: run.unhealthy ?? null,
      ...(run.restartPolicy === undefined ? {} : { restartPolicy: run.restartPolicy }),
    });
  }

  /** The bot's check failed (or its heartbeats stopped) since `atMs`: its `unhealthy` event, kept once under `key` whichever agent saw it. */
  async turnedUnhealthy(botId: string, key: string, atMs: number, check: UnhealthyEnd['check'], output: string | null): Promise<void> {
    await this.write({ kind: 'unhealthy', botId, key, atMs, check, output });
  }

  /**
   * Claims the watchdog's restart of the bot's run that began at `runStartMs`: keeps its `restarted` event,
   * once whichever agents ask (docs/api.md §13). True when this call kept it: this agent restarts the bot,
   * and the run's end is recorded as ended for its health. False when another agent (or this one) already
   * did; throws while the store is away (no agent can know it acts alone then).
   */
  async claimRestart(botId: string, runStartMs: number, unhealthy: UnhealthyEnd, unhealthySinceMs: number): Promise<boolean> {
    let claimed = false;
    await this.keep(async (tx, kept) => {
      const before = kept.length;
      const since = new Date(unhealthySinceMs).toISOString();
      await this.append(tx, kept, botId, 'restarted', new Date(), { reason: 'unhealthy', by: 'watchdog', ...unhealthy, unhealthy_since: since }, undefined, watchdogKey(botId, runStartMs));
      claimed = kept.length > before;
    });
    return claimed;
  }

  /** A lifecycle operation through the agent ended; a stop ends a crash loop. */
  async operationEnded(botId: string, operation: 'restart' | 'stop' | 'start', result: string, by: OperationCaller): Promise<void> {
    await this.write({ kind: 'operation', id: randomUUID(), botId, operation, result, by, atMs: Date.now() });
  }

  /** An event of the agent's own doing (a pull's, a deploy's), of `type` with its `fields` (docs/api.md §9). */
  async note(botId: string, type: string, fields: Readonly<Record<string, unknown>>): Promise<void> {
    await this.write({ kind: 'event', id: randomUUID(), botId, type, fields, atMs: Date.now() });
  }

  /** The bot's last exit, crash-loop state and crashes in the hour before `now`. */
  async record(botId: string, now: Date): Promise<BotRecord> {
    const sinceMs = now.getTime() - HOUR_MS;
    // From memory while the store answers (a store away is said as ever); a record kept holds the last hour's crashes at least.
    let kept = this.store.reachable ? this.records.get(botId) : undefined;
    if (kept === undefined) {
      const mark = this.records.mark(botId);
      kept = await this.reading(() => this.store.botRecord(botId, sinceMs));
      this.records.put(botId, mark, kept);
    }
    const { lastExit, crashLooping, crashes, givenUp } = kept;
    return { lastExit, crashLooping, crashesLastHour: crashes.filter((atMs) => atMs >= sinceMs).length, givenUp: givenUpHolds(givenUp) };
  }

  /**
   * `record` (its last exit without logs) and `exitsLastHour` of every one of `botIds`, for the console's table:
   * a query per question for all of them, not five a bot (docs/performance.md).
   */
  async tableRecords(botIds: readonly string[], now: Date): Promise<(botId: string) => { record: BotRecord; exitsLastHour: number }> {
    const records = await this.reading(() => this.store.tableRecords(botIds, now.getTime() - HOUR_MS));
    return (botId) => {
      const kept = records.get(botId);
      if (!kept) return { record: { lastExit: null, crashLooping: false, crashesLastHour: 0, givenUp: false }, exitsLastHour: 0 };
      return { record: { lastExit: kept.lastExit, crashLooping: kept.crashLooping, crashesLastHour: kept.crashes, givenUp: givenUpHolds(kept.givenUp) }, exitsLastHour: kept.ends };
    };
  }

  /** Keeps a revision or its new outcome (docs/api.md §15), and the event that tells it, once. */
  async revision(botId: string, record: RevisionRecord, event?: { type: string; fields: Record<string, unknown> }): Promise<void> {
    await this.write({ kind: 'revision', id: randomUUID(), botId, record, event, atMs: Date.now() });
  }

  /** Revisions of every bot still `deploying`. */
  deployingRevisions(): Promise<{ botId: string; revision: number; atMs: number }[]> {
    return this.reading(() => this.store.deployingRevisions());
  }

  /** The bot's newest revisions, newest first. */
  revisions(botId: string, limit: number): Promise<RevisionRecord[]> {
    return this.reading(() => this.store.revisions(botId, limit));
  }

  exits(botId: string, limit: number): Promise<ExitRecord[]> {
    return this.reading(() => this.store.exits(botId, limit));
  }

  /**
   * When the bot was last removed (ms since the epoch), if ever: as this agent removed it (its removal waiting
   * in the spool included), else as the shared state read it lately (SharedState); undefined (not known) while
   * the store is away or slow.
   */
  async removedAt(botId: string): Promise<number | undefined> {
    const spooled = this.spooledRemovals.get(botId);
    if (spooled !== undefined) return spooled;
    // A bot's call waits for no database that is away or slow: its token is then judged by its signature alone.
    return this.shared.removedAt(botId);
  }

  /**
   * The bot's own chats (docs/api.md §16), as JSON; undefined when it has none, or when they were sealed with a
   * key this agent does not hold (reported). 503 while the store is away.
   */
  async botChats(botId: string): Promise<string | undefined> {
    const kept = await this.reading(() => this.store.botChats(botId));
    return kept === undefined ? undefined : this.openChats(botId, kept);
  }

  /** Sets the bot's own chats (JSON), sealed (docs/api.md §16), or drops them (undefined); a removal of the bot drops them too. */
  async setBotChats(botId: string, chats: string | undefined): Promise<void> {
    const sealed = chats === undefined ? undefined : this.chatSeal.seal(botId, chats);
    await this.reading(() => this.store.setBotChats(botId, sealed, Date.now()));
  }

  /** What the store keeps of a bot's chats, opened; undefined (reported) where this agent's key does not open it. */
  openChats(botId: string, kept: string): string | undefined {
    try {
      return this.chatSeal.open(botId, kept);
    } catch (err) {
      this.options.report?.(`bot ${botId}'s own chats were sealed with another key (AGENT_FLEET_KEY or AGENT_ADMIN_TOKEN changed?): set them again`, err);
      return undefined;
    }
  }

  /**
   * Keeps a console session's end (by its nonce, until its expiry) for every agent sharing the store;
   * while the store is away, in the spool, so the others refuse it as soon as it answers again.
   */
  async endSession(nonce: string, untilMs: number): Promise<void> {
    if (!(await this.write({ kind: 'session-ended', nonce, untilMs }))) {
      throw new HistoryUnavailable("the history's database does not answer and its spool is full: the session ends on this agent only");
    }
  }

  /**
   * Whether a console session was ended on any agent sharing the store, as the shared state read it lately
   * (SharedState); not ended as far as is known while the store is away or slow.
   */
  sessionEnded(nonce: string): Promise<boolean> {
    const until = this.spooledSessionEnds.get(nonce);
    if (until !== undefined) {
      if (until > Date.now()) return Promise.resolve(true);
      this.spooledSessionEnds.delete(nonce);
    }
    return this.shared.sessionEnded(nonce);
  }

  /**
   * Forgets the bot (it was removed): its records, events and crash-loop state
   * go, and runs that began before now are not recorded when they are reported
   * late, so that a bot created later under the same id starts with none, and
   * its tokens signed before now name nobody. Kept like any write: while the
   * store is away it waits in the spool (and this agent knows the removal at
   * once); HistoryUnavailable only when the spool is full.
   */
  async forget(botId: string): Promise<void> {
    clearTimeout(this.recoveries.get(botId));
    this.recoveries.delete(botId);
    this.runs.delete(botId);
    const at = Date.now();
    this.shared.removed(botId, at);
    if (!(await this.write({ kind: 'forgotten', botId, atMs: at }))) {
      throw new HistoryUnavailable(`the history's database does not answer and its spool is full: bot ${botId} is not forgotten yet; remove it again`);
    }
  }

  /** Stops following the store; resolves once the writes asked for so far are kept. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.spoolRetry);
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
      await this.write({ kind: 'recovery', botId, atMs: now });
      return;
    }
    this.checkRecoveryAt(botId, at);
  }

  /** Checks the bot's recovery at `atMs` (checkRecovery), and not before. */
  private checkRecoveryAt(botId: string, atMs: number): void {
    clearTimeout(this.recoveries.get(botId));
    if (this.closed) return;
    this.recoveries.set(botId, setTimeout(() => void this.checkRecovery(botId), Math.max(0, atMs - Date.now()) + 50).unref());
  }

  /**
   * Gives up on a bot whose crashes within its policy's window reached its most (docs/api.md §13): keeps the
   * `given-up` event, keyed by the run that crashed last, so that one agent alone does it. True when this call kept it.
   */
  private async giveUpPast(tx: HistoryTx, kept: StoredEvent[], botId: string, runKey: string, atMs: number, policy: RestartPolicy | undefined): Promise<boolean> {
    if (policy?.maxCrashes === undefined) return false;
    // A start through the agent after a give-up gives the bot its whole budget again.
    const last = await tx.givenUp(botId);
    // Given up on already (a run the runtime began before the stop came): one give-up, one stop.
    if (givenUpHolds(last)) return false;
    const sinceMs = Math.max(atMs - policy.windowMs, last?.endedMs ?? 0);
    const crashes = (await tx.crashesSince(botId, sinceMs)).filter((crashMs) => crashMs <= atMs);
    if (crashes.length < policy.maxCrashes) return false;
    const before = kept.length;
    const fields = { crashes: crashes.length, window_s: policy.windowMs / 1000, max_crashes: policy.maxCrashes };
    await this.append(tx, kept, botId, 'given-up', new Date(atMs), fields, runKey);
    if (kept.length === before) return false;
    await tx.giveUp(botId, atMs);
    return true;
  }

  /**
   * The bot's crash back-off under its restart policy (docs/api.md §13): from its second crash within the
   * window, it is held stopped for `backoff_s`, doubling with each further crash up to `backoff_max_s`
   * (the first is the runtime's to restart at once). Kept once per run, by one agent.
   */
  private async backOffPast(tx: HistoryTx, kept: StoredEvent[], botId: string, runKey: string, atMs: number, policy: RestartPolicy | undefined): Promise<BackOff | undefined> {
    if (policy === undefined || policy.crashBackOff === false || !this.options.onBackingOff || this.options.backsOff?.(botId) === false) return undefined;
    const last = await tx.givenUp(botId);
    // Given up on: a run the runtime began before the stop came ended; the bot stays stopped.
    if (givenUpHolds(last)) return undefined;
    const sinceMs = Math.max(atMs - policy.windowMs, last?.endedMs ?? 0);
    const crashes = (await tx.crashesSince(botId, sinceMs)).filter((crashMs) => crashMs <= atMs).length;
    // An operation, give-up or deploy kept since the crash (its record came late): the bot is left as that left it.
    if (((await tx.lastEventAt(botId, CRASH_ENDERS)) ?? -1) >= atMs) return undefined;
    if (crashes < 2) return { botId, untilMs: atMs, seq: undefined, crashAtMs: atMs };
    const waitMs = Math.min(policy.backoffFirstMs * 2 ** Math.min(crashes - 2, 30), policy.backoffMaxMs);
    const untilMs = atMs + waitMs;
    const before = kept.length;
    await this.append(tx, kept, botId, 'backing-off', new Date(atMs), { crashes, wait_s: waitMs / 1000, until: new Date(untilMs).toISOString() }, runKey);
    const event = kept.length === before ? undefined : kept.at(-1);
    return event && { botId, untilMs, seq: event.seq, crashAtMs: atMs };
  }

  /** The crash back-offs still pending (none of BACK_OFF_ENDERS of their bot since), kept within the last two days. */
  async pendingBackOffs(nowMs: number): Promise<BackOff[]> {
    const events = await this.reading(() => this.store.latestOfType('backing-off', BACK_OFF_ENDERS, nowMs - 2 * DAY_MS));
    return events.map((event) => ({ botId: event.botId, seq: event.seq, untilMs: Date.parse(String((JSON.parse(event.data) as { until?: string }).until)) || nowMs }));
  }

  /** Whether the bot crashed at or after `sinceMs`. */
  async crashedSince(botId: string, sinceMs: number): Promise<boolean> {
    return (await this.reading(() => this.store.crashesSince(botId, sinceMs))).length > 0;
  }

  /** Those of `botIds` whose latest run ended in a crash that nothing has answered since (no start, back-off, operation, give-up or deploy). */
  async unansweredCrashes(botIds: readonly string[], nowMs: number): Promise<string[]> {
    if (botIds.length === 0) return [];
    // In turn with this agent's writes: one under way may have kept a crash and not yet its back-off (SQLite reads what its own transaction wrote).
    return this.inTurn(() =>
      this.reading(async () => {
        const events = await this.store.latestOfType('exited', ['exited', 'started', ...BACK_OFF_ENDERS], nowMs - 2 * DAY_MS, botIds);
        const unanswered: string[] = [];
        for (const event of events) {
          const { at, exit } = JSON.parse(event.data) as { at?: string; exit?: { requested?: boolean } };
          if (exit?.requested !== false) continue;
          // Kept after an operation that came after the crash (its record came late): answered.
          if (((await this.store.lastEventAt(event.botId, ['started', ...CRASH_ENDERS])) ?? -1) >= Date.parse(String(at))) continue;
          unanswered.push(event.botId);
        }
        return unanswered;
      }),
    );
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
    key = runKey === undefined ? undefined : `${type}:${runKey}`,
  ): Promise<void> {
    // The agent's own targets take every event, queued with it; a bot's own chats (docs/api.md §16) take its events.
    const deliverAtMs = this.options.deliver ? Date.now() : undefined;
    const event = await tx.appendEvent(botId, type, at.getTime(), (id) => JSON.stringify({ id, type, bot_id: botId, at: at.toISOString(), node: this.options.node, ...fields }), key, deliverAtMs);
    if (!event) return;
    if (deliverAtMs === undefined && (await tx.botChats(botId)) !== undefined) await tx.addDelivery(event, Date.now());
    kept.push(event);
  }

  /** Reads of the store; while it is away, a 503 that says so. */
  private async reading<T>(read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } catch (err) {
      if (!this.store.isAway(err)) throw err;
      throw new HistoryUnavailable(HISTORY_AWAY, { cause: err });
    }
  }

  /** Runs `work` when the writes queued before it are done, and holds those queued after it until it is. */
  private inTurn<T>(work: () => Promise<T>): Promise<T> {
    const next = this.writes.then(work);
    this.writes = next.then(
      () => undefined,
      () => undefined,
    );
    return next;
  }

  /**
   * Keeps `write` after the writes asked for before it, in a batch with those queued beside it. While the store is
   * away (and until what waits is written) it waits in the spool; any other fault is reported, not thrown.
   */
  private write(write: HistoryWrite): Promise<boolean> {
    return new Promise((done) => {
      this.queued.push({ write, done });
      this.drainSoon();
    });
  }

  private drainSoon(): void {
    if (this.drainAsked) return;
    this.drainAsked = true;
    this.writes = this.writes.then(() => this.drain());
  }

  /** Keeps the writes queued so far, up to BATCH_MAX, in one transaction; the rest in the next, after what was asked meanwhile. */
  private async drain(): Promise<void> {
    this.drainAsked = false;
    let batch = this.queued.splice(0, BATCH_MAX);
    if (this.queued.length > 0) this.drainSoon();
    if (this.spool.size === 0) {
      batch = await this.keptOrLeft(batch);
      if (batch.length === 0) return;
    }
    for (const { write, done } of batch) {
      const spooled = this.spool.add(write);
      if (spooled) this.noteSpooled(write);
      else this.options.report?.(`the history spool is full: ${WHAT[write.kind]}${'botId' in write ? ` of bot ${write.botId}` : ''} is lost`, undefined);
      done(spooled);
    }
    this.retrySpoolSoon(this.options.spoolRetryMs ?? SPOOL_RETRY_MS);
  }

  /**
   * Keeps the batch; answers what is left for the spool: nothing, or (the store away) the writes from the first
   * one not kept. A failure outside any one write's part (a step before the transaction: a session's end, a read)
   * that is not the store away has each write kept alone, so that only the write that failed is lost, and said.
   */
  private async keptOrLeft(batch: QueuedWrite[]): Promise<QueuedWrite[]> {
    try {
      await this.applyAll(batch.map(({ write }) => write));
      for (const { done } of batch) done(true);
      return [];
    } catch (err) {
      if (this.store.isAway(err)) {
        this.options.report?.('the history store is away: what it must keep waits in the spool until it answers', err);
        return batch;
      }
      if (batch.length === 1) {
        this.options.report?.(`the history could not keep ${WHAT[batch[0]!.write.kind]}`, err);
        batch[0]!.done(true);
        return [];
      }
    }
    for (const [index, queued] of batch.entries()) {
      if ((await this.keptOrLeft([queued])).length > 0) return batch.slice(index);
    }
    return [];
  }

  private retrySpoolSoon(afterMs: number): void {
    if (this.spoolRetry !== undefined || this.closed) return;
    this.spoolRetry = setTimeout(() => {
      this.spoolRetry = undefined;
      this.writes = this.writes.then(() => this.writeSpool());
    }, afterMs);
  }

  /** Writes what waits in the spool, oldest first, until all is written or the store is away again. */
  private async writeSpool(): Promise<void> {
    for (let write = this.spool.first(); write !== undefined && !this.closed; write = this.spool.first()) {
      try {
        await this.applyAll([write]);
      } catch (err) {
        if (this.store.isAway(err)) {
          this.retrySpoolSoon(this.options.spoolRetryMs ?? SPOOL_RETRY_MS);
          return;
        }
        this.options.report?.(`the history could not keep ${WHAT[write.kind]}`, err);
      }
      this.spool.shift();
    }
    if (this.spool.size === 0) {
      this.spooledEnds.clear();
      this.spooledRemovals.clear();
    }
  }

  private noteSpooled(write: HistoryWrite): void {
    if (write.kind === 'ended') this.spooledEnds.set(write.botId, Math.max(write.atMs, this.spooledEnds.get(write.botId) ?? 0));
    if (write.kind === 'forgotten') this.spooledRemovals.set(write.botId, Math.max(write.atMs, this.spooledRemovals.get(write.botId) ?? 0));
    if (write.kind === 'session-ended' && write.untilMs > Date.now()) {
      for (const [nonce, until] of this.spooledSessionEnds) if (until <= Date.now()) this.spooledSessionEnds.delete(nonce);
      this.spooledSessionEnds.set(write.nonce, write.untilMs);
    }
  }

  /**
   * Keeps `writes` in one transaction. A write the store refuses is reported and the others kept: the batch is
   * tried again with each write a part of its own (a savepoint), which costs two statements a write, so only then.
   * Throws when the store is away (nothing is kept then), or what else it threw outside a write.
   */
  private async applyAll(writes: readonly HistoryWrite[]): Promise<void> {
    // What a write reads outside the transaction, for the whole batch at once: the lock it holds is for writes alone.
    const runs = writes.flatMap((write) => (write.kind === 'started' || write.kind === 'ended' ? [write.botId] : []));
    const forgotten = await this.shared.store.forgottenAtOf([...new Set(runs)]);
    const prepared = await Promise.all(writes.map((write) => this.prepare(write, forgotten)));
    for (const write of writes) if (write.kind === 'session-ended') await this.shared.store.endSession(write.nonce, write.untilMs, Date.now());
    const attempt = { refused: false };
    const afterCommit = await this.keepAll(writes, prepared, attempt).catch(async (err: unknown) => {
      if (!attempt.refused || this.store.isAway(err)) throw err;
      return this.keepAll(writes, prepared, undefined);
    });
    // This agent's own writes change what its status reads show at once; another agent's reach it as events.
    for (const write of writes) if ('botId' in write) this.records.changed(write.botId);
    for (const done of afterCommit) done();

    // A bot that starts again while crash-looping recovers once this run has lasted long enough (and no crash came
    // since, which the check then reads), whichever agent kept the start.
    const starts = new Map(writes.flatMap((write) => (write.kind === 'started' ? [[write.botId, write.startedAtMs] as const] : [])));
    if (starts.size === 0) return;
    const looping = await this.store.crashLoopingBots().catch(() => []);
    for (const botId of looping) {
      const startedAtMs = starts.get(botId);
      if (startedAtMs !== undefined) this.checkRecoveryAt(botId, startedAtMs + this.recoverAfterMs);
    }
  }

  /**
   * Keeps the prepared writes in one transaction; answers what to do once it committed. With `attempt`, a write the
   * store refuses ends the transaction (and says so in `attempt`); without, each write is a part of its own, and one
   * refused is reported and undone alone.
   */
  private async keepAll(writes: readonly HistoryWrite[], prepared: ReadonlyArray<RestartPolicy | undefined | typeof SKIP>, attempt: { refused: boolean } | undefined): Promise<Array<() => void>> {
    const afterCommit: Array<() => void> = [];
    await this.store.transaction(async (tx) => {
      for (const [index, write] of writes.entries()) {
        const policy = prepared[index];
        if (policy === SKIP || write.kind === 'session-ended') continue;
        const kept: StoredEvent[] = [];
        const then: Array<() => void> = [];
        try {
          if (attempt) await this.applyIn(tx, write, policy, kept, then);
          else await tx.part(() => this.applyIn(tx, write, policy, kept, then));
        } catch (err) {
          if (this.store.isAway(err)) throw err;
          if (attempt) {
            attempt.refused = true;
            throw err;
          }
          this.options.report?.(`the history could not keep ${WHAT[write.kind]}`, err);
          continue;
        }
        for (const event of kept) afterCommit.push(() => this.options.onKept?.(event));
        afterCommit.push(...then);
      }
    });
    return afterCommit;
  }

  /** What a write reads before its batch's transaction: SKIP for a run of a bot removed since (`forgotten`), a crash's restart policy. */
  private async prepare(write: HistoryWrite, forgotten: ReadonlyMap<string, number>): Promise<RestartPolicy | undefined | typeof SKIP> {
    // The run of a bot removed after it began was the removed bot's.
    const removedAfter = (botId: string, beganMs: number): boolean => beganMs <= (forgotten.get(botId) ?? -Infinity);
    if (write.kind === 'started') return removedAfter(write.botId, write.startedAtMs) ? SKIP : undefined;
    if (write.kind !== 'ended') return undefined;
    if (removedAfter(write.botId, write.startedAtMs ?? write.atMs)) return SKIP;
    // A crash is counted against the bot's restart policy, read from the runtime (docs/api.md §13); a runtime
    // that does not answer in time holds no write behind this one: the crash is kept, no give-up judged.
    if (write.requested && !write.oomKilled) return undefined;
    if (write.restartPolicy !== undefined) return write.restartPolicy ?? undefined;
    return (await within(POLICY_READ_MS, this.botInfo(write.botId)))?.healthPolicy.restart;
  }

  /** Keeps one write in the transaction `tx`: the events it kept go to `kept`, what it asks of the agent once they are committed to `then`. */
  private async applyIn(tx: HistoryTx, write: Exclude<HistoryWrite, { kind: 'session-ended' }>, policy: RestartPolicy | undefined, kept: StoredEvent[], then: Array<() => void>): Promise<void> {
    switch (write.kind) {
      case 'started': {
        this.runs.set(write.botId, write.startedAtMs);
        const at = new Date(write.startedAtMs);
        await this.append(tx, kept, write.botId, 'started', at, { started_at: at.toISOString() }, write.key);
        return;
      }
      case 'ended': {
        if (this.runs.get(write.botId) === write.startedAtMs || write.startedAtMs === null) this.runs.delete(write.botId);
        const at = new Date(write.atMs);
        const draft: ExitRecord = {
          at: at.toISOString(),
          exit_code: write.exitCode,
          signal: write.signal ?? signalOf(write.exitCode),
          oom_killed: write.oomKilled,
          requested: write.requested && !write.oomKilled,
          started_at: write.startedAtMs === null ? null : new Date(write.startedAtMs).toISOString(),
          unhealthy: write.unhealthy ?? null,
          logs: write.logs,
        };
        const record = await endedForHealth(tx, write.botId, write.startedAtMs, draft);
        if (!(await tx.addExit(write.botId, record, write.key))) return;
        const { logs: _logs, ...exit } = record;
        await this.append(tx, kept, write.botId, 'exited', at, { exit }, write.key);
        // The runtime's own restart for the bot's health (the kubelet's, on a failed liveness probe) is reported as the watchdog's is.
        if (write.unhealthy) {
          const fields = { reason: 'unhealthy', by: 'kubelet', ...write.unhealthy, unhealthy_since: null };
          await this.append(tx, kept, write.botId, 'restarted', at, fields, write.key);
        }
        if (record.requested) return;
        const crashes = await tx.crashesSince(write.botId, write.atMs - CRASH_WINDOW_MS);
        // A loop that ended (a stop through the agent) after this crash is not begun again by its record, come late.
        const endedSince = ((await tx.lastEventAt(write.botId, ['recovered'])) ?? -1) >= write.atMs;
        if (!endedSince && isCrashLooping(crashes, write.atMs) && (await tx.startCrashLoop(write.botId, write.atMs))) {
          await this.append(tx, kept, write.botId, 'crash-looping', at, { crashes: crashes.length, window_s: CRASH_WINDOW_MS / 1000 });
        }
        // Only the agent that kept the `given-up` (`backing-off`) event stops the bot.
        if (await this.giveUpPast(tx, kept, write.botId, write.key, write.atMs, policy)) {
          then.push(() => this.options.onGivenUp?.(write.botId));
          return;
        }
        // A restart for its health (the watchdog's, the kubelet's) waited out its own back-off already.
        const backOff = record.unhealthy === null ? await this.backOffPast(tx, kept, write.botId, write.key, write.atMs, policy) : undefined;
        if (backOff) then.push(() => this.options.onBackingOff?.(backOff));
        return;
      }
      case 'operation': {
        const at = new Date(write.atMs);
        // A write spooled by a version before the key has none: it is kept as it was then.
        const key = write.id === undefined ? undefined : `operation:${write.id}`;
        await this.append(tx, kept, write.botId, 'operation', at, { operation: write.operation, result: write.result, by: write.by }, undefined, key);
        if (write.operation === 'stop' && write.result === 'ok') await this.recover(tx, kept, write.botId, at);
        if (write.operation !== 'stop' && write.result === 'ok') await tx.endGiveUp(write.botId, write.atMs);
        return;
      }
      case 'unhealthy': {
        const fields = { check: write.check, output: write.output };
        await this.append(tx, kept, write.botId, 'unhealthy', new Date(write.atMs), fields, undefined, `unhealthy:${write.key}`);
        return;
      }
      case 'event':
        await this.append(tx, kept, write.botId, write.type, new Date(write.atMs), write.fields, undefined, `event:${write.id}`);
        return;
      case 'revision': {
        if (!(await tx.putRevision(write.botId, write.record)) || write.event === undefined) return;
        const fields = { revision: write.record.revision, ...write.event.fields };
        await this.append(tx, kept, write.botId, write.event.type, new Date(write.atMs), fields, undefined, `revision:${write.id}`);
        return;
      }
      case 'recovery':
        await this.recover(tx, kept, write.botId, new Date(write.atMs));
        return;
      case 'forgotten':
        await tx.forget(write.botId, write.atMs);
    }
  }
}

/** The key of the watchdog's `restarted` event for a bot's run: one restart per run, whichever agents see it. */
function watchdogKey(botId: string, runStartMs: number): string {
  return `restarted:watchdog:${botId}:${runStartMs}`;
}

/**
 * A requested end of a run whose restart the watchdog claimed (by any agent) is an end for the bot's
 * health: not requested, so that it counts as a crash, with the check that failed (docs/api.md §13).
 */
async function endedForHealth(tx: HistoryTx, botId: string, startedAtMs: number | null, record: ExitRecord): Promise<ExitRecord> {
  if (!record.requested || startedAtMs === null) return record;
  const claim = await tx.eventData(watchdogKey(botId, startedAtMs));
  if (claim === undefined) return record;
  const { check, output } = JSON.parse(claim) as UnhealthyEnd;
  return { ...record, requested: false, unhealthy: { check, output } };
}
