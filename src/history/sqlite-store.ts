import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { SharedStateStore } from '../shared/shared-state.js';
import type { SQLInputValue, StatementSync } from 'node:sqlite';
import type { Rows, SqlPort } from './sql-port.js';
import { fitJson } from '../json-text.js';
import { cursorOf, deliveryOf, placementOf, storedNodeOf, eventOf, exitOf, revisionOf, tableRecordsOf, WritesInTransactions, EVENTS_KEPT, EVENTS_KEPT_MS, EVENTS_MAX, EXIT_LOG_BYTES, EXITS_KEPT, HOUR_MS, PRUNE_EVERY, REVISIONS_KEPT } from './history-store.js';
import type { ExitRecord, HistoryStore, HistoryTx, OpenTx, NodeBot, NodeRecord, PendingDelivery, Placement, StoredNode, RevisionRecord, StoredEvent, TableRecord } from './history-store.js';
import { migrate, SCHEMA_VERSION_TABLE } from './migrations.js';
import { narrowFiles, privateDir, privateFile } from '../private-files.js';

/**
 * Each bot's oldest pending delivery, the only one of its bot that may be made (in order per bot): one
 * pass over the (bot_id, seq) index, where a correlated NOT EXISTS probed it once for every waiting row
 * (with 50,000 waiting, 27 ms a query against 5; without the index, 900).
 */
export const OLDEST_PENDING = 'SELECT MIN(seq) AS seq FROM deliveries GROUP BY bot_id';

/** `history.sqlite` in `dataDir`, made first as its owner's alone (its journals take its mode). */
function historyFile(dataDir: string): string {
  privateDir(dataDir);
  narrowFiles(dataDir, ['history.sqlite-wal', 'history.sqlite-shm', 'history.sqlite-journal']);
  return privateFile(join(dataDir, 'history.sqlite'));
}

/** The migration that gives exit records a logs column: the logs kept inside old records move there. */
const LOGS_COLUMN_VERSION = 3;

/** SQLite's primary result codes for faults that may pass (sqlite.org/rescode.html). */
const SQLITE_BUSY = 5;
const SQLITE_IOERR = 10;
const SQLITE_FULL = 13;

/**
 * The history of one agent in one SQLite file under AGENT_DATA_DIR
 * (node:sqlite: nothing to install, no server to run). Every statement is
 * synchronous and small; transactions run one after another, and the events
 * one keeps reach subscribers once it has committed.
 */
export class SqliteHistoryStore extends WritesInTransactions implements HistoryStore, SharedStateStore {
  private readonly db: DatabaseSync;
  private readonly statements = new Map<string, StatementSync>();
  private readonly listeners = new Set<(event: StoredEvent) => void>();
  /** The end of the last transaction begun: the next waits for it. */
  private queue: Promise<unknown> = Promise.resolve();
  private writes = 0;

  /** Opens (and creates) `history.sqlite` in `dataDir`; ':memory:' keeps it in memory. */
  constructor(dataDir: string) {
    super();
    this.db = new DatabaseSync(dataDir === ':memory:' ? ':memory:' : historyFile(dataDir));
    try {
      this.db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 2000;');
      this.migrate();
    } catch (err) {
      this.db.close();
      throw err;
    }
  }

  /**
   * Brings the file to the newest schema, in one transaction that holds the
   * file's write lock: an agent sharing the folder waits, then finds it done.
   */
  private migrate(): void {
    this.db.exec('BEGIN IMMEDIATE');
    try {
      migrate({
        dialect: 'sqlite',
        recordedVersion: () => {
          this.db.exec(SCHEMA_VERSION_TABLE);
          return Number(this.db.prepare('SELECT COALESCE(MAX(version), 0) AS v FROM schema_version').get()?.v ?? 0);
        },
        versionBeforeMigrations: () => this.versionBeforeMigrations(),
        apply: (migration) => {
          this.db.exec(migration.sql);
          if (migration.version === LOGS_COLUMN_VERSION) this.moveLogsOutOfRecords();
        },
        record: (migration, atMs) => {
          this.db.prepare('INSERT INTO schema_version (version, name, applied_at_ms) VALUES (?, ?, ?)').run(migration.version, migration.name, atMs);
        },
      });
      this.db.exec('COMMIT');
    } catch (err) {
      if (this.db.isTransaction) this.db.exec('ROLLBACK');
      throw err;
    }
  }

  /**
   * The version of a file made before the store kept one, read from what it
   * holds (each shape a release wrote: see migrations/sqlite); 0 for a new file.
   */
  private versionBeforeMigrations(): number {
    const has = (type: string, name: string) => this.db.prepare('SELECT 1 FROM sqlite_master WHERE type = ? AND name = ?').get(type, name) !== undefined;
    if (!has('table', 'exits')) return 0;
    const deliveryColumns = this.db.prepare('PRAGMA table_info(deliveries)').all();
    if (deliveryColumns.some((column) => column.name === 'claimed_until_ms')) return 4;
    if (has('table', 'forgotten')) return 3;
    return has('index', 'events_by_time') ? 2 : 1;
  }

  /**
   * Stores of the first versions kept each record's logs inside its JSON,
   * escaped (a control byte took six bytes) and up to 4 MiB: they move to the
   * column of their own, bounded, and only the newest records of each bot keep them.
   */
  private moveLogsOutOfRecords(): void {
    const old = this.db.prepare("SELECT seq, bot_id FROM exits WHERE json_extract(record, '$.logs') IS NOT NULL ORDER BY seq DESC").all();
    const recordOf = this.db.prepare('SELECT record FROM exits WHERE seq = ?');
    const kept = new Map<string, number>();
    // One record in memory at a time: an old store may hold many of 4 MiB.
    for (const row of old) {
      const { logs, ...record } = JSON.parse(recordOf.get(row.seq as number)?.record as string) as ExitRecord;
      const botId = row.bot_id as string;
      const newer = kept.get(botId) ?? 0;
      kept.set(botId, newer + 1);
      const text = newer < EXITS_KEPT ? fitJson(logs, EXIT_LOG_BYTES) : '';
      this.statement('UPDATE exits SET record = ?, logs = ? WHERE seq = ?').run(JSON.stringify(record), text, row.seq as number);
    }
  }

  async opened(): Promise<void> {}

  /** The file is this agent's own: it is there whenever the agent is. */
  readonly reachable = true;

  /** A file another agent holds locked, a disk full or failing: a write that may succeed later. */
  isAway(err: unknown): boolean {
    const code = ((err as { errcode?: unknown } | null)?.errcode as number | undefined) ?? -1;
    return [SQLITE_BUSY, SQLITE_IOERR, SQLITE_FULL].includes(code & 0xff);
  }

  async close(): Promise<void> {
    await this.queue;
    this.listeners.clear();
    if (this.db.isOpen) this.db.close();
  }

  transaction<T>(work: (tx: OpenTx) => Promise<T>): Promise<T> {
    const run = this.queue.then(async () => {
      const appended: StoredEvent[] = [];
      const part = async <P>(partWork: () => Promise<P>): Promise<P> => {
        const mark = appended.length;
        this.db.exec('SAVEPOINT part');
        try {
          const value = await partWork();
          this.db.exec('RELEASE part');
          return value;
        } catch (err) {
          if (this.db.isTransaction) this.db.exec('ROLLBACK TO part; RELEASE part');
          appended.length = mark;
          throw err;
        }
      };
      this.db.exec('BEGIN IMMEDIATE');
      try {
        const value = await work({ ...this.txAppendingTo(appended), part });
        this.db.exec('COMMIT');
        this.publish(appended);
        return value;
      } catch (err) {
        if (this.db.isTransaction) this.db.exec('ROLLBACK');
        throw err;
      }
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Statements and transactions for a room of its own (the schedules), in this store's queue: never inside a transaction of another's. */
  sql(): SqlPort {
    const run = async (text: string, values: readonly unknown[] = []): Promise<Rows> =>
      // `$1` is PostgreSQL's placeholder; SQLite's numbered one is `?1`.
      this.statement(text.replace(/\$(\d+)/g, '?$1')).all(...(values as SQLInputValue[])) as Rows;
    const serially = <T>(work: () => Promise<T>): Promise<T> => {
      const done = this.queue.then(work);
      this.queue = done.catch(() => undefined);
      return done;
    };
    return {
      query: (text, values) => serially(() => run(text, values)),
      transaction: (work) =>
        serially(async () => {
          this.db.exec('BEGIN IMMEDIATE');
          try {
            const value = await work(run);
            this.db.exec('COMMIT');
            return value;
          } catch (err) {
            if (this.db.isTransaction) this.db.exec('ROLLBACK');
            throw err;
          }
        }),
    };
  }

  subscribe(listener: (event: StoredEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async exits(botId: string, limit: number): Promise<ExitRecord[]> {
    return this.readExits(botId, limit);
  }

  async crashesSince(botId: string, sinceMs: number): Promise<number[]> {
    return this.readCrashesSince(botId, sinceMs);
  }

  async eventData(key: string): Promise<string | undefined> {
    return this.readEventData(key);
  }

  async lastEventAt(botId: string, types: readonly string[]): Promise<number | undefined> {
    return this.readLastEventAt(botId, types);
  }

  private readLastEventAt(botId: string, types: readonly string[]): number | undefined {
    const row = this.statement(`SELECT MAX(at_ms) AS at_ms FROM events WHERE bot_id = ? AND type IN (${types.map(() => '?').join(', ')})`).get(botId, ...types);
    return row?.at_ms === null || row?.at_ms === undefined ? undefined : Number(row.at_ms);
  }

  private readEventData(key: string): string | undefined {
    return this.statement('SELECT data FROM events WHERE run_key = ?').get(key)?.data as string | undefined;
  }

  async isCrashLooping(botId: string): Promise<boolean> {
    return this.readIsCrashLooping(botId);
  }

  async tableRecords(botIds: readonly string[], sinceMs: number): Promise<Map<string, TableRecord>> {
    const ids = JSON.stringify(botIds);
    const chosen = 'bot_id IN (SELECT value FROM json_each(?))';
    return tableRecordsOf({
      // SQLite takes a bare column from the row whose MAX it answers: the newest record of each bot.
      lastExits: this.statement(`SELECT bot_id, record, MAX(seq) FROM exits WHERE ${chosen} GROUP BY bot_id`).all(ids),
      counts: this.statement(`SELECT bot_id, SUM(requested = 0) AS crashes, COUNT(*) AS ends FROM exits WHERE ${chosen} AND at_ms >= ? GROUP BY bot_id`).all(ids, sinceMs),
      looping: this.statement(`SELECT bot_id FROM crash_loops WHERE ${chosen}`).all(ids),
      givenUp: this.statement(`SELECT bot_id, since_ms, ended_ms FROM given_up WHERE ${chosen}`).all(ids),
    });
  }

  async forgottenAt(botId: string): Promise<number | undefined> {
    return (this.statement('SELECT at_ms FROM forgotten WHERE bot_id = ?').get(botId)?.at_ms as number | undefined) ?? undefined;
  }

  async forgottenAtOf(botIds: readonly string[]): Promise<Map<string, number>> {
    const read = this.statement('SELECT at_ms FROM forgotten WHERE bot_id = ?');
    const found = new Map<string, number>();
    for (const botId of botIds) {
      const at = read.get(botId)?.at_ms;
      if (at !== undefined) found.set(botId, Number(at));
    }
    return found;
  }

  async eventsAfter(seq: number, botId: string | undefined, limit: number): Promise<StoredEvent[]> {
    const rows = botId
      ? this.statement('SELECT seq, bot_id, type, data FROM events WHERE bot_id = ? AND seq > ? ORDER BY seq LIMIT ?').all(botId, seq, limit)
      : this.statement('SELECT seq, bot_id, type, data FROM events WHERE seq > ? ORDER BY seq LIMIT ?').all(seq, limit);
    return rows.map(eventOf);
  }

  async latestOfType(type: string, among: readonly string[], sinceMs: number, botIds?: readonly string[]): Promise<StoredEvent[]> {
    const marks = among.map(() => '?').join(', ');
    const latest = `e.at_ms >= ? AND e.type = ? AND e.seq = (SELECT MAX(x.seq) FROM events x WHERE x.bot_id = e.bot_id AND x.type IN (${marks}))`;
    if (botIds === undefined) {
      return this.statement(`SELECT seq, bot_id, type, data FROM events e WHERE ${latest} ORDER BY e.seq`).all(sinceMs, type, ...among).map(eventOf);
    }
    // json_each: one statement however many bots are asked (no list of marks to build, nor a cap on them).
    return this.statement(`SELECT seq, bot_id, type, data FROM events e WHERE e.bot_id IN (SELECT value FROM json_each(?)) AND ${latest} ORDER BY e.seq`)
      .all(JSON.stringify(botIds), sinceMs, type, ...among)
      .map(eventOf);
  }

  async crashLoopingBots(): Promise<string[]> {
    return this.statement('SELECT bot_id FROM crash_loops').all().map((row) => row.bot_id as string);
  }

  async crashLoopingCount(): Promise<number> {
    return Number(this.statement('SELECT COUNT(*) AS n FROM crash_loops').get()?.n ?? 0);
  }

  async claimDeliveries(nowMs: number, limit: number, holdMs: number): Promise<PendingDelivery[]> {
    const rows = this.statement(
      `UPDATE deliveries SET claimed_until_ms = ? WHERE seq IN (
         SELECT d.seq FROM deliveries d JOIN (${OLDEST_PENDING}) oldest ON d.seq = oldest.seq
          WHERE d.next_at_ms <= ? AND d.claimed_until_ms <= ?
          ORDER BY d.next_at_ms LIMIT ?)
       RETURNING *`,
    ).all(nowMs + holdMs, nowMs, nowMs, limit);
    return rows.map(deliveryOf).sort((a, b) => a.nextAtMs - b.nextAtMs);
  }

  async nextDeliveryAt(): Promise<number | undefined> {
    const row = this.statement(
      `SELECT MIN(MAX(d.next_at_ms, d.claimed_until_ms)) AS at_ms FROM deliveries d JOIN (${OLDEST_PENDING}) oldest ON d.seq = oldest.seq`,
    ).get();
    return (row?.at_ms as number | null | undefined) ?? undefined;
  }

  async deliveryDone(seq: number): Promise<void> {
    this.statement('DELETE FROM deliveries WHERE seq = ?').run(seq);
  }

  async deliveryFailed(seq: number, attempts: number, nextAtMs: number, doneTargets: readonly string[] = []): Promise<void> {
    this.statement('UPDATE deliveries SET attempts = ?, next_at_ms = ?, claimed_until_ms = 0, done_targets = ? WHERE seq = ?').run(attempts, nextAtMs, doneTargets.join(','), seq);
  }

  async lastRunEventMs(): Promise<number | undefined> {
    const row = this.statement("SELECT MAX(at_ms) AS at_ms FROM events WHERE run_key IS NOT NULL AND type IN ('started', 'exited')").get();
    return (row?.at_ms as number | null | undefined) ?? undefined;
  }

  async endSession(nonce: string, untilMs: number, nowMs: number): Promise<void> {
    this.statement('DELETE FROM ended_sessions WHERE until_ms <= ?').run(nowMs);
    this.statement('INSERT OR IGNORE INTO ended_sessions (nonce, until_ms) VALUES (?, ?)').run(nonce, untilMs);
  }

  async sessionEnded(nonce: string): Promise<boolean> {
    return this.statement('SELECT 1 FROM ended_sessions WHERE nonce = ?').get(nonce) !== undefined;
  }

  private queueDelivery(event: StoredEvent, nowMs: number): void {
    this.statement('INSERT OR IGNORE INTO deliveries (seq, bot_id, type, data, next_at_ms, first_at_ms) VALUES (?, ?, ?, ?, ?, ?)').run(event.seq, event.botId, event.type, event.data, nowMs, nowMs);
  }

  /** The reads and writes of one transaction under way; the events it appends are collected in `appended`. */
  private txAppendingTo(appended: StoredEvent[]): HistoryTx {
    return {
      addExit: async (botId, record, runKey) => this.writeExit(botId, record, runKey),
      exits: async (botId, limit) => this.readExits(botId, limit),
      crashesSince: async (botId, sinceMs) => this.readCrashesSince(botId, sinceMs),
      lastEventAt: async (botId, types) => this.readLastEventAt(botId, types),
      eventData: async (key) => this.readEventData(key),
      putRevision: async (botId, record) => {
        const { changes } = this.statement(
          `INSERT INTO revisions (bot_id, revision, spec, made_by, made_at_ms, outcome, reason, ended_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (bot_id, revision) DO UPDATE SET outcome = excluded.outcome, reason = excluded.reason, ended_at_ms = excluded.ended_at_ms
           WHERE revisions.outcome != excluded.outcome`,
        ).run(botId, record.revision, JSON.stringify(record.spec), record.by, Date.parse(record.at), record.outcome, record.reason, record.ended_at === null ? null : Date.parse(record.ended_at));
        this.statement(`DELETE FROM revisions WHERE bot_id = ? AND revision <= (SELECT MAX(revision) FROM revisions WHERE bot_id = ?) - ${REVISIONS_KEPT}`).run(botId, botId);
        return changes > 0;
      },
      revisions: async (botId, limit) => this.readRevisions(botId, limit),
      appendEvent: async (botId, type, atMs, build, runKey, deliverAtMs) => {
        const event = this.writeEvent(botId, type, atMs, build, runKey);
        if (event) appended.push(event);
        if (event && deliverAtMs !== undefined) this.queueDelivery(event, deliverAtMs);
        return event;
      },
      isCrashLooping: async (botId) => this.readIsCrashLooping(botId),
      startCrashLoop: async (botId, sinceMs) =>
        this.statement('INSERT OR IGNORE INTO crash_loops (bot_id, since_ms) VALUES (?, ?)').run(botId, sinceMs).changes > 0,
      endCrashLoop: async (botId) => this.statement('DELETE FROM crash_loops WHERE bot_id = ?').run(botId).changes > 0,
      givenUp: async (botId) => {
        const row = this.statement('SELECT since_ms, ended_ms FROM given_up WHERE bot_id = ?').get(botId);
        return row === undefined ? undefined : { sinceMs: Number(row.since_ms), endedMs: row.ended_ms === null ? undefined : Number(row.ended_ms) };
      },
      giveUp: async (botId, sinceMs) => {
        this.statement('INSERT INTO given_up (bot_id, since_ms) VALUES (?, ?) ON CONFLICT (bot_id) DO UPDATE SET since_ms = excluded.since_ms, ended_ms = NULL').run(botId, sinceMs);
      },
      endGiveUp: async (botId, atMs) => {
        this.statement('UPDATE given_up SET ended_ms = ? WHERE bot_id = ? AND ended_ms IS NULL AND since_ms <= ?').run(atMs, botId, atMs);
      },
      botChats: async (botId) => {
        const row = this.statement('SELECT chats FROM bot_chats WHERE bot_id = ?').get(botId);
        return row === undefined ? undefined : String(row.chats);
      },
      setBotChats: async (botId, chats, atMs) => {
        if (chats === undefined) this.statement('DELETE FROM bot_chats WHERE bot_id = ?').run(botId);
        else this.statement('INSERT INTO bot_chats (bot_id, chats, set_ms) VALUES (?, ?, ?) ON CONFLICT (bot_id) DO UPDATE SET chats = excluded.chats, set_ms = excluded.set_ms').run(botId, chats, atMs);
      },
      addDelivery: async (event, nowMs) => this.queueDelivery(event, nowMs),
      forget: async (botId, atMs) => {
        // What happened up to the removal: a removal written again late (a spool replayed) leaves a later bot's alone.
        this.statement('DELETE FROM exits WHERE bot_id = ? AND at_ms <= ?').run(botId, atMs);
        this.statement('DELETE FROM events WHERE bot_id = ? AND at_ms <= ?').run(botId, atMs);
        this.statement('DELETE FROM crash_loops WHERE bot_id = ? AND since_ms <= ?').run(botId, atMs);
        this.statement('DELETE FROM given_up WHERE bot_id = ? AND since_ms <= ?').run(botId, atMs);
        this.statement('DELETE FROM bot_chats WHERE bot_id = ? AND set_ms <= ?').run(botId, atMs);
        this.statement('DELETE FROM revisions WHERE bot_id = ? AND made_at_ms <= ?').run(botId, atMs);
        this.statement('DELETE FROM placements WHERE bot_id = ? AND placed_ms <= ?').run(botId, atMs);
        this.statement('DELETE FROM schedule_runs WHERE bot_id = ?').run(botId);
        this.statement('DELETE FROM schedules WHERE bot_id = ? AND created_ms <= ?').run(botId, atMs);
        this.statement('INSERT INTO forgotten (bot_id, at_ms) VALUES (?, ?) ON CONFLICT (bot_id) DO UPDATE SET at_ms = MAX(at_ms, excluded.at_ms)').run(botId, atMs);
      },
    };
  }

  private writeExit(botId: string, record: ExitRecord, runKey: string): boolean {
    const { logs, ...fields } = record;
    const { changes } = this.statement(
      'INSERT OR IGNORE INTO exits (bot_id, at_ms, requested, record, run_key, logs) VALUES (?, ?, ?, ?, ?, ?)',
    ).run(botId, Date.parse(record.at), record.requested ? 1 : 0, JSON.stringify(fields), runKey, fitJson(logs, EXIT_LOG_BYTES));
    if (changes === 0) return false;
    const older = `SELECT seq FROM exits WHERE bot_id = ? ORDER BY seq DESC LIMIT -1 OFFSET ${EXITS_KEPT}`;
    this.statement(`DELETE FROM exits WHERE bot_id = ? AND at_ms < ? AND seq IN (${older})`).run(botId, Date.now() - HOUR_MS, botId);
    this.statement(`UPDATE exits SET record = '{}', logs = '' WHERE bot_id = ? AND logs != '' AND seq IN (${older})`).run(botId, botId);
    return true;
  }

  private readExits(botId: string, limit: number): ExitRecord[] {
    const rows = this.statement('SELECT record, logs FROM exits WHERE bot_id = ? ORDER BY seq DESC LIMIT ?').all(botId, Math.min(limit, EXITS_KEPT));
    return rows.map((row) => exitOf(row.record as string, row.logs as string));
  }

  private readRevisions(botId: string, limit: number): RevisionRecord[] {
    return this.statement('SELECT * FROM revisions WHERE bot_id = ? ORDER BY revision DESC LIMIT ?').all(botId, limit).map((row) => revisionOf(row));
  }

  async revisions(botId: string, limit: number): Promise<RevisionRecord[]> {
    return this.readRevisions(botId, limit);
  }

  async renewNode(name: string, url: string | null, atMs: number, seal: string | null): Promise<void> {
    await this.transaction(async () => {
      this.statement('INSERT INTO nodes (name, url, alive_ms, seal) VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET url = excluded.url, alive_ms = excluded.alive_ms, seal = excluded.seal').run(name, url, atMs, seal);
    });
  }

  async putNodeBots(name: string, bots: readonly NodeBot[], atMs: number): Promise<void> {
    await this.transaction(async () => {
      const named = new Set(bots.map((bot) => bot.botId));
      for (const row of this.statement('SELECT bot_id FROM node_bots WHERE node = ?').all(name)) {
        if (!named.has(row.bot_id as string)) this.statement('DELETE FROM node_bots WHERE bot_id = ?').run(row.bot_id as string);
      }
      const put = this.statement(
        'INSERT INTO node_bots (bot_id, node, running, seen_ms) VALUES (?, ?, ?, ?) ON CONFLICT (bot_id) DO UPDATE SET node = excluded.node, running = excluded.running, seen_ms = excluded.seen_ms',
      );
      for (const bot of bots) put.run(bot.botId, name, bot.running ? 1 : 0, atMs);
    });
  }

  async nodeOfBot(botId: string): Promise<StoredNode | undefined> {
    const row = this.statement(
      // The fleet's placement first: a leftover copy a cut move left elsewhere is not the bot.
      `SELECT n.name, n.url, n.alive_ms, n.seal FROM nodes n
       WHERE n.name = COALESCE((SELECT node FROM placements WHERE bot_id = ?), (SELECT node FROM node_bots WHERE bot_id = ?))`,
    ).get(botId, botId);
    return row && storedNodeOf(row);
  }

  async botsOfNode(name: string): Promise<NodeBot[]> {
    const rows = this.statement('SELECT bot_id, running FROM node_bots WHERE node = ? ORDER BY bot_id').all(name);
    return rows.map((row) => ({ botId: row.bot_id as string, running: Number(row.running) === 1 }));
  }

  async placementsOf(botIds: readonly string[]): Promise<Placement[]> {
    const read = this.statement('SELECT bot_id, node, generation, start_pending FROM placements WHERE bot_id = ?');
    return botIds.flatMap((botId) => {
      const row = read.get(botId);
      return row === undefined ? [] : [placementOf(row)];
    }).sort((a, b) => (a.botId < b.botId ? -1 : 1));
  }

  async place(botId: string, from: Placement | undefined, node: string, startPending: boolean, atMs: number): Promise<Placement | undefined> {
    const generation = (from?.generation ?? 0) + 1;
    const { changes } = from === undefined
      ? this.statement('INSERT OR IGNORE INTO placements (bot_id, node, generation, start_pending, placed_ms) VALUES (?, ?, ?, ?, ?)').run(botId, node, generation, startPending ? 1 : 0, atMs)
      : this.statement('UPDATE placements SET node = ?, generation = ?, start_pending = ?, placed_ms = ? WHERE bot_id = ? AND generation = ?').run(node, generation, startPending ? 1 : 0, atMs, botId, from.generation);
    return Number(changes) === 1 ? { botId, node, generation, startPending } : undefined;
  }

  async placementStarted(botId: string, generation: number): Promise<void> {
    this.statement('UPDATE placements SET start_pending = 0 WHERE bot_id = ? AND generation = ?').run(botId, generation);
  }

  async nodes(): Promise<NodeRecord[]> {
    const rows = this.statement(
      `SELECT n.name, n.url, n.alive_ms, n.seal, COUNT(b.bot_id) AS bots, COALESCE(SUM(b.running), 0) AS running
       FROM nodes n LEFT JOIN node_bots b ON b.node = n.name GROUP BY n.name, n.url, n.alive_ms, n.seal ORDER BY n.name`,
    ).all();
    return rows.map((row) => ({ ...storedNodeOf(row), bots: Number(row.bots), running: Number(row.running) }));
  }

  async deployingRevisions(): Promise<{ botId: string; revision: number; atMs: number }[]> {
    return this.statement("SELECT bot_id, revision, made_at_ms FROM revisions WHERE outcome = 'deploying'")
      .all()
      .map((row) => ({ botId: row.bot_id as string, revision: Number(row.revision), atMs: Number(row.made_at_ms) }));
  }

  private readCrashesSince(botId: string, sinceMs: number): number[] {
    const rows = this.statement('SELECT at_ms FROM exits WHERE bot_id = ? AND requested = 0 AND at_ms >= ? ORDER BY at_ms').all(botId, sinceMs);
    return rows.map((row) => row.at_ms as number);
  }

  private readIsCrashLooping(botId: string): boolean {
    return this.statement('SELECT 1 FROM crash_loops WHERE bot_id = ?').get(botId) !== undefined;
  }



  private writeEvent(botId: string, type: string, atMs: number, build: (cursor: string) => string, runKey?: string): StoredEvent | undefined {
    const { changes, lastInsertRowid } = this.statement(
      "INSERT OR IGNORE INTO events (bot_id, type, at_ms, data, run_key) VALUES (?, ?, ?, '', ?)",
    ).run(botId, type, atMs, runKey ?? null);
    if (changes === 0) return undefined;
    const seq = Number(lastInsertRowid);
    const data = build(cursorOf(seq));
    this.statement('UPDATE events SET data = ? WHERE seq = ?').run(data, seq);
    this.pruneNow();
    return { seq, botId, type, data };
  }

  private publish(events: StoredEvent[]): void {
    if (events.length === 0) return;
    queueMicrotask(() => {
      for (const event of events) for (const listener of this.listeners) listener(event);
    });
  }

  private pruneNow(): void {
    this.writes += 1;
    if (this.writes % PRUNE_EVERY !== 0) return;
    const newest = Number(this.statement('SELECT COALESCE(MAX(seq), 0) AS seq FROM events').get()?.seq ?? 0);
    this.statement('DELETE FROM events WHERE (seq <= ? AND at_ms < ?) OR seq <= ?').run(newest - EVENTS_KEPT, Date.now() - EVENTS_KEPT_MS, newest - EVENTS_MAX);
  }

  private statement(sql: string): StatementSync {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }
}
