import type { SqlPort } from './sql-port.js';
/** How a run of a bot ended (docs/api.md §8), as answered and kept. */
export interface ExitRecord {
  readonly at: string;
  readonly exit_code: number | null;
  readonly signal: string | null;
  readonly oom_killed: boolean;
  readonly requested: boolean;
  readonly started_at: string | null;
  /** The watchdog, or the kubelet's liveness probe, ended this run: the check that failed, and its output (docs/api.md §13). */
  readonly unhealthy: UnhealthyEnd | null;
  readonly logs: string;
}

/** Why a run was ended for its health. */
export interface UnhealthyEnd {
  readonly check: 'exec' | 'heartbeat';
  readonly output: string | null;
}

/** How a revision ended, or `deploying` while it is under way (docs/api.md §15). */
export type RevisionOutcome = 'deploying' | 'succeeded' | 'failed' | 'rolled-back' | 'interrupted';

/** One revision of a bot (docs/api.md §15), as answered and kept. */
export interface RevisionRecord {
  readonly revision: number;
  /** What it runs: image, command, limits, health, and the names (never the values) of its extra variables. */
  readonly spec: Readonly<Record<string, unknown>>;
  /** `platform`, or `rollback` for one the agent went back to by itself. */
  readonly by: string;
  readonly at: string;
  readonly outcome: RevisionOutcome;
  /** Why it failed or was undone; null otherwise. */
  readonly reason: string | null;
  readonly ended_at: string | null;
}

/** The revisions kept per bot, newest first. */
export const REVISIONS_KEPT = 20;

/** One event (docs/api.md §9): its `data` as sent, and the cursor it carries. */
export interface StoredEvent {
  readonly seq: number;
  readonly botId: string;
  readonly type: string;
  /** The event's JSON, exactly as sent and signed. */
  readonly data: string;
}

/** A webhook delivery not yet answered 2xx. */
export interface PendingDelivery {
  readonly seq: number;
  readonly botId: string;
  readonly type: string;
  readonly data: string;
  readonly attempts: number;
  readonly nextAtMs: number;
  readonly firstAtMs: number;
  /** The targets it reached already (the webhook, chats): a retry skips them. */
  readonly doneTargets: readonly string[];
}

/** The last records kept per bot, whatever their age; older ones within the last hour keep only their time, for the crash count. */
export const EXITS_KEPT = 50;
/** The most text a record's logs take, measured as answered in JSON (docs/api.md §8): the newest lines are kept. */
export const EXIT_LOG_BYTES = 64 * 1024;
/** Events kept: at least the last 1,000 and the last 24 hours ... */
export const EVENTS_KEPT = 1_000;
export const EVENTS_KEPT_MS = 24 * 3_600_000;
/** ... and never more than this many, whatever happens within a day. */
export const EVENTS_MAX = 200_000;
export const HOUR_MS = 3_600_000;
/** Pruning runs once per this many writes, not on every one. */
export const PRUNE_EVERY = 100;

/** The cursor of an event: its sequence number, as an opaque string. */
export const cursorOf = (seq: number): string => String(seq);

/** The sequence number a cursor stands for; undefined for anything that is not one. */
export function seqOf(cursor: string): number | undefined {
  return /^\d{1,15}$/.test(cursor) ? Number(cursor) : undefined;
}

/** What one transaction may read and write. */
export interface HistoryTx {
  /**
   * Keeps an exit record, its logs bounded to EXIT_LOG_BYTES (the newest lines);
   * false when one with this `runKey` is kept already. The bot's records past
   * the newest EXITS_KEPT are dropped, but for the time and kind of those of
   * the last hour, which the crash count reads.
   */
  addExit(botId: string, record: ExitRecord, runKey: string): Promise<boolean>;
  /** The bot's newest `limit` exit records (at most EXITS_KEPT), newest first. */
  exits(botId: string, limit: number): Promise<ExitRecord[]>;
  /**
   * Keeps a revision, or its new outcome (with reason and end) when it is kept already; false when nothing
   * changed. The bot's revisions past the newest REVISIONS_KEPT are dropped.
   */
  putRevision(botId: string, record: RevisionRecord): Promise<boolean>;
  /** The bot's newest `limit` revisions, newest first. */
  revisions(botId: string, limit: number): Promise<RevisionRecord[]>;
  /** The data of the kept event with this key; undefined when none is kept. */
  eventData(key: string): Promise<string | undefined>;
  /** Runs of the bot that ended without a request at or after `sinceMs`, oldest first. */
  crashesSince(botId: string, sinceMs: number): Promise<number[]>;
  /** When the bot's latest event of the given types happened (ms); undefined when it has none. */
  lastEventAt(botId: string, types: readonly string[]): Promise<number | undefined>;
  /**
   * Appends an event; `build` makes its data from the cursor it gets. Undefined
   * when an event with this `runKey` is kept already. Cursors grow in the order
   * events are committed: a reader that has seen one has seen every smaller one.
   * With `deliverAtMs`, its webhook delivery is queued too, due then (as addDelivery does).
   */
  appendEvent(botId: string, type: string, atMs: number, build: (cursor: string) => string, runKey?: string, deliverAtMs?: number): Promise<StoredEvent | undefined>;
  isCrashLooping(botId: string): Promise<boolean>;
  /** Puts the bot in the crash-looping state; false when it was already (by this agent or another). */
  startCrashLoop(botId: string, sinceMs: number): Promise<boolean>;
  /** Ends the bot's crash-looping state; false when it was not in it. */
  endCrashLoop(botId: string): Promise<boolean>;
  /**
   * The agent's last give-up on the bot under its restart policy (docs/api.md §13): since when, and when a start
   * through the agent ended it (undefined: it holds); undefined when the agent never gave up on the bot.
   */
  givenUp(botId: string): Promise<GiveUp | undefined>;
  /** The agent gives up on the bot (it is stopped) at `sinceMs`. */
  giveUp(botId: string, sinceMs: number): Promise<void>;
  /** The bot was started again through the agent at `atMs`: given up on no more, its crashes counted afresh. */
  endGiveUp(botId: string, atMs: number): Promise<void>;
  /** The bot's own chats (docs/api.md §16), as JSON; undefined when it has none. */
  botChats(botId: string): Promise<string | undefined>;
  /** Sets the bot's own chats at `atMs` (JSON), or drops them (undefined). */
  setBotChats(botId: string, chats: string | undefined, atMs: number): Promise<void>;
  /** Queues the event's webhook delivery. */
  addDelivery(event: StoredEvent, nowMs: number): Promise<void>;
  /**
   * Drops everything kept of the bot (records, events, crash-loop state) and
   * remembers when, so that the end of a run begun before then, reported late,
   * is not taken for a later bot of the same id.
   */
  forget(botId: string, atMs: number): Promise<void>;
}

/** A transaction under way: what it may read and write, and parts of it that may fail alone. */
export interface OpenTx extends HistoryTx {
  /** Runs `work` as a part of the transaction (a savepoint): when it throws, its writes alone are undone and the transaction goes on. */
  part<T>(work: () => Promise<T>): Promise<T>;
}

/**
 * Exit records, events, crash-loop states and pending webhook deliveries:
 * SQLite under AGENT_DATA_DIR for one agent, PostgreSQL for several sharing one
 * history (AGENT_DATABASE_URL). Writes that belong together run in one transaction.
 */
export interface HistoryStore extends HistoryTx {
  /** Resolves once the store can be used (its tables made); rejects while it cannot be reached (a later call tries again). */
  opened(): Promise<void>;
  /** Whether the store's last statement reached it. */
  readonly reachable: boolean;
  /** Whether `err`, thrown by the store, says it is away for now (a write may succeed later), not that it refused the write for good. */
  isAway(err: unknown): boolean;
  /** Runs `work` in one transaction: all of its writes are kept, or none (but for the parts that failed alone). */
  transaction<T>(work: (tx: OpenTx) => Promise<T>): Promise<T>;
  /** Revisions of every bot still `deploying`: those a dead agent left unjudged (docs/api.md §15). */
  deployingRevisions(): Promise<{ botId: string; revision: number; atMs: number }[]>;
  /** Node `name` is alive at `atMs` (docs/api.md §17), reached at `url`. */
  renewNode(name: string, url: string | null, atMs: number, seal: string | null): Promise<void>;
  /** The bots node `name`'s runtime holds now, with whether each runs: the node's other rows go, a bot named moves here. */
  putNodeBots(name: string, bots: readonly NodeBot[], atMs: number): Promise<void>;
  /** Every node, with its bots counted, by name. */
  nodes(): Promise<NodeRecord[]>;
  /** The node that holds the bot, as its agent last said; undefined when none does. */
  nodeOfBot(botId: string): Promise<StoredNode | undefined>;
  /** The bots the node holds as its agent last said, by id. */
  botsOfNode(name: string): Promise<NodeBot[]>;
  /** Where the fleet places each of `botIds` that a move took (docs/fleet.md); a bot never moved has none. */
  placementsOf(botIds: readonly string[]): Promise<Placement[]>;
  /**
   * Places the bot on `node` at `atMs`, from the placement `from` read (undefined: none yet), with its generation one
   * more; undefined when the placement is no longer `from` (another writer came first), and nothing changes.
   */
  place(botId: string, from: Placement | undefined, node: string, startPending: boolean, atMs: number): Promise<Placement | undefined>;
  /** The bot's placement of `generation` is started: no start waits on it any more. */
  placementStarted(botId: string, generation: number): Promise<void>;
  /** Statements and transactions on the same database, for a room that keeps tables of its own there (the schedules). */
  sql(): SqlPort;
  /** Kept events after `seq`, oldest first, of one bot or of all. */
  eventsAfter(seq: number, botId: string | undefined, limit: number): Promise<StoredEvent[]>;
  /**
   * The events of `type` kept at or after `sinceMs` that are still their bot's latest of the types `among`
   * (a crash back-off no start, stop or give-up has come after), oldest first; of the bots `botIds` alone when given.
   */
  latestOfType(type: string, among: readonly string[], sinceMs: number, botIds?: readonly string[]): Promise<StoredEvent[]>;
  /** Calls `listener` with each event committed from now on, by any agent sharing the store, in cursor order. */
  subscribe(listener: (event: StoredEvent) => void): () => void;
  crashLoopingBots(): Promise<string[]>;
  crashLoopingCount(): Promise<number>;
  /**
   * Claims for `holdMs` the deliveries due at `nowMs` that are the oldest
   * pending one of their bot and that no one holds: each is made by one agent
   * at a time, and again by any once its claim lapses.
   */
  claimDeliveries(nowMs: number, limit: number, holdMs: number): Promise<PendingDelivery[]>;
  /** When the next delivery falls due or its claim lapses (ms); undefined when none waits. */
  nextDeliveryAt(): Promise<number | undefined>;
  deliveryDone(seq: number): Promise<void>;
  /** A delivery tried again at `nextAtMs`; `doneTargets` (when given) those it reached already, which the retry skips. */
  deliveryFailed(seq: number, attempts: number, nextAtMs: number, doneTargets?: readonly string[]): Promise<void>;
  /** When the newest run start or end that is kept happened (ms), for a runtime that can replay what came after. */
  lastRunEventMs(): Promise<number | undefined>;
  /**
   * What the console's table shows of each of `botIds`, read for all of them in one query per question (not
   * five a bot: docs/performance.md); a bot with nothing kept has no entry. Its newest exit record comes
   * without its logs.
   */
  tableRecords(botIds: readonly string[], sinceMs: number): Promise<Map<string, TableRecord>>;
  /** What a bot's status shows of its history, in one read: its newest exit record (with its logs), and the times of its crashes at or after `sinceMs`. */
  botRecord(botId: string, sinceMs: number): Promise<KeptRecord>;
  close(): Promise<void>;
}

/** The agent's last give-up on a bot (docs/api.md §13): since when, and when a start through the agent ended it. */
export interface GiveUp {
  readonly sinceMs: number;
  readonly endedMs: number | undefined;
}

/** The bot is given up on and was not started through the agent since. */
export const givenUpHolds = (givenUp: GiveUp | undefined): boolean => givenUp !== undefined && givenUp.endedMs === undefined;

/** A bot's status as the history keeps it (HistoryStore.botRecord). */
export interface KeptRecord {
  lastExit: ExitRecord | null;
  crashLooping: boolean;
  /** When its runs that ended without a request ended (ms), oldest first. */
  crashes: number[];
  givenUp: GiveUp | undefined;
}

/** One bot's row of the console's table, as the history keeps it (HistoryStore.tableRecords). */
export interface TableRecord {
  lastExit: ExitRecord | null;
  crashLooping: boolean;
  /** Runs ended without a request, and runs ended at all, at or after the `sinceMs` asked for. */
  crashes: number;
  ends: number;
  givenUp: GiveUp | undefined;
}

/** The four answers of a store's table read, as rows, put together by bot. */
export function tableRecordsOf(answers: {
  lastExits: readonly Record<string, unknown>[];
  counts: readonly Record<string, unknown>[];
  looping: readonly Record<string, unknown>[];
  givenUp: readonly Record<string, unknown>[];
}): Map<string, TableRecord> {
  const records = new Map<string, TableRecord>();
  const of = (row: Record<string, unknown>): TableRecord => {
    const botId = row.bot_id as string;
    let record = records.get(botId);
    if (!record) records.set(botId, (record = { lastExit: null, crashLooping: false, crashes: 0, ends: 0, givenUp: undefined }));
    return record;
  };
  for (const row of answers.lastExits) of(row).lastExit = exitOf(row.record as string, '');
  for (const row of answers.counts) Object.assign(of(row), { crashes: Number(row.crashes), ends: Number(row.ends) });
  for (const row of answers.looping) of(row).crashLooping = true;
  for (const row of answers.givenUp) of(row).givenUp = { sinceMs: Number(row.since_ms), endedMs: row.ended_ms === null ? undefined : Number(row.ended_ms) };
  return records;
}

/** A node's row as either store reads it. */
export function storedNodeOf(row: Record<string, unknown>): StoredNode {
  return { name: row.name as string, url: (row.url as string | null) ?? null, aliveMs: Number(row.alive_ms), seal: (row.seal as string | null) ?? null };
}

/** An event as a row of either store holds it. */
export function eventOf(row: Record<string, unknown>): StoredEvent {
  return { seq: Number(row.seq), botId: row.bot_id as string, type: row.type as string, data: row.data as string };
}

/** An exit record as a row of either store holds it: its fields' JSON, and its logs; a record kept before `unhealthy` was has it null. */
export function exitOf(record: string, logs: string): ExitRecord {
  const fields = JSON.parse(record) as Omit<ExitRecord, 'logs' | 'unhealthy'> & { unhealthy?: ExitRecord['unhealthy'] };
  return { ...fields, unhealthy: fields.unhealthy ?? null, logs };
}

/** A pending delivery as a row of either store holds it. */
export function deliveryOf(row: Record<string, unknown>): PendingDelivery {
  return {
    seq: Number(row.seq),
    botId: row.bot_id as string,
    type: row.type as string,
    data: row.data as string,
    attempts: Number(row.attempts),
    nextAtMs: Number(row.next_at_ms),
    firstAtMs: Number(row.first_at_ms),
    doneTargets: typeof row.done_targets === 'string' && row.done_targets !== '' ? row.done_targets.split(',') : [],
  };
}

/** A store's writes outside a transaction: each is a transaction of its own. */
export abstract class WritesInTransactions implements
    Pick<HistoryTx, 'addExit' | 'appendEvent' | 'startCrashLoop' | 'endCrashLoop' | 'givenUp' | 'giveUp' | 'endGiveUp' | 'botChats' | 'setBotChats' | 'addDelivery' | 'forget' | 'putRevision'>
{
  abstract transaction<T>(work: (tx: OpenTx) => Promise<T>): Promise<T>;
  abstract exits(botId: string, limit: number): Promise<ExitRecord[]>;
  abstract isCrashLooping(botId: string): Promise<boolean>;
  abstract crashesSince(botId: string, sinceMs: number): Promise<number[]>;

  async botRecord(botId: string, sinceMs: number): Promise<KeptRecord> {
    const [exits, crashLooping, crashes, givenUp] = await Promise.all([this.exits(botId, 1), this.isCrashLooping(botId), this.crashesSince(botId, sinceMs), this.givenUp(botId)]);
    return { lastExit: exits[0] ?? null, crashLooping, crashes, givenUp };
  }

  addExit(botId: string, record: ExitRecord, runKey: string): Promise<boolean> {
    return this.transaction((tx) => tx.addExit(botId, record, runKey));
  }

  appendEvent(botId: string, type: string, atMs: number, build: (cursor: string) => string, runKey?: string, deliverAtMs?: number): Promise<StoredEvent | undefined> {
    return this.transaction((tx) => tx.appendEvent(botId, type, atMs, build, runKey, deliverAtMs));
  }

  startCrashLoop(botId: string, sinceMs: number): Promise<boolean> {
    return this.transaction((tx) => tx.startCrashLoop(botId, sinceMs));
  }

  endCrashLoop(botId: string): Promise<boolean> {
    return this.transaction((tx) => tx.endCrashLoop(botId));
  }

  givenUp(botId: string): Promise<GiveUp | undefined> {
    return this.transaction((tx) => tx.givenUp(botId));
  }

  giveUp(botId: string, sinceMs: number): Promise<void> {
    return this.transaction((tx) => tx.giveUp(botId, sinceMs));
  }

  endGiveUp(botId: string, atMs: number): Promise<void> {
    return this.transaction((tx) => tx.endGiveUp(botId, atMs));
  }

  botChats(botId: string): Promise<string | undefined> {
    return this.transaction((tx) => tx.botChats(botId));
  }

  setBotChats(botId: string, chats: string | undefined, atMs: number): Promise<void> {
    return this.transaction((tx) => tx.setBotChats(botId, chats, atMs));
  }

  addDelivery(event: StoredEvent, nowMs: number): Promise<void> {
    return this.transaction((tx) => tx.addDelivery(event, nowMs));
  }

  forget(botId: string, atMs: number): Promise<void> {
    return this.transaction((tx) => tx.forget(botId, atMs));
  }

  putRevision(botId: string, record: RevisionRecord): Promise<boolean> {
    return this.transaction((tx) => tx.putRevision(botId, record));
  }
}

/** A revisions row as both stores read it. */
export function revisionOf(row: Record<string, unknown>): RevisionRecord {
  return {
    revision: Number(row.revision),
    spec: JSON.parse(row.spec as string) as Record<string, unknown>,
    by: row.made_by as string,
    at: new Date(Number(row.made_at_ms)).toISOString(),
    outcome: row.outcome as RevisionOutcome,
    reason: (row.reason as string | null) ?? null,
    ended_at: row.ended_at_ms === null || row.ended_at_ms === undefined ? null : new Date(Number(row.ended_at_ms)).toISOString(),
  };
}

/** A bot as its node's agent last said it (docs/api.md §17). */
/** Where the fleet places a bot a move took (docs/fleet.md): the one node whose copy may run. */
export interface Placement {
  readonly botId: string;
  readonly node: string;
  /** One more at each change: a write from an older placement changes nothing. */
  readonly generation: number;
  /** The bot ran when it was moved: its node starts it, once. */
  readonly startPending: boolean;
}

/** A placement as a row of either store holds it. */
export function placementOf(row: Record<string, unknown>): Placement {
  return { botId: row.bot_id as string, node: row.node as string, generation: Number(row.generation), startPending: row.start_pending === true || Number(row.start_pending) === 1 };
}

export interface NodeBot {
  readonly botId: string;
  readonly running: boolean;
}

/** A node of the fleet as the store keeps it. */
export interface StoredNode {
  readonly name: string;
  readonly url: string | null;
  /** When its agent last said it is alive. */
  readonly aliveMs: number;
  /** What its agent sealed the row with (src/fleet/node-seal.ts); null from an agent without a fleet key. */
  readonly seal: string | null;
}

/** A node's row with the bots it holds, counted. */
export interface NodeRecord extends StoredNode {
  readonly bots: number;
  readonly running: number;
}
