import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { StatementSync } from 'node:sqlite';
import { fitJson } from '../runtime/log-tail.js';

/** How a run of a bot ended (CONTRACT.md §8), as answered and kept. */
export interface ExitRecord {
  readonly at: string;
  readonly exit_code: number | null;
  readonly signal: string | null;
  readonly oom_killed: boolean;
  readonly requested: boolean;
  readonly started_at: string | null;
  readonly logs: string;
}

/** One event (CONTRACT.md §9): its `data` as sent, and the cursor it carries. */
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
}

/** The last records kept per bot, whatever their age; older ones within the last hour keep only their time, for the crash count. */
export const EXITS_KEPT = 50;
/** The most text a record's logs take, measured as answered in JSON (CONTRACT.md §8): the newest lines are kept. */
export const EXIT_LOG_BYTES = 64 * 1024;
/** Events kept: at least the last 1,000 and the last 24 hours ... */
export const EVENTS_KEPT = 1_000;
export const EVENTS_KEPT_MS = 24 * 3_600_000;
/** ... and never more than this many, whatever happens within a day. */
const EVENTS_MAX = 200_000;
const HOUR_MS = 3_600_000;
/** Pruning runs once per this many writes, not on every one. */
const PRUNE_EVERY = 100;

/** The cursor of an event: its sequence number, as an opaque string. */
export const cursorOf = (seq: number): string => String(seq);

/** The sequence number a cursor stands for; undefined for anything that is not one. */
export function seqOf(cursor: string): number | undefined {
  return /^\d{1,15}$/.test(cursor) ? Number(cursor) : undefined;
}

/**
 * Exit records, events, crash-loop states and pending webhook deliveries, in
 * one SQLite file under AGENT_DATA_DIR (node:sqlite: nothing to install, no
 * server to run). Every call is synchronous and small; writes that belong
 * together run in one transaction, so a crash of the agent loses none of them.
 */
export class HistoryStore {
  private readonly db: DatabaseSync;
  private readonly statements = new Map<string, StatementSync>();
  private writes = 0;

  /** Opens (and creates) `history.sqlite` in `dataDir`; ':memory:' keeps it in memory. */
  constructor(dataDir: string) {
    if (dataDir !== ':memory:') mkdirSync(dataDir, { recursive: true });
    this.db = new DatabaseSync(dataDir === ':memory:' ? ':memory:' : join(dataDir, 'history.sqlite'));
    this.db.exec(`
      PRAGMA journal_mode = WAL;
      PRAGMA synchronous = NORMAL;
      PRAGMA busy_timeout = 2000;
      CREATE TABLE IF NOT EXISTS exits (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        bot_id TEXT NOT NULL,
        at_ms INTEGER NOT NULL,
        requested INTEGER NOT NULL,
        record TEXT NOT NULL,
        run_key TEXT UNIQUE,
        logs TEXT NOT NULL DEFAULT ''
      );
      CREATE INDEX IF NOT EXISTS exits_by_bot ON exits (bot_id, seq);
      CREATE TABLE IF NOT EXISTS events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        bot_id TEXT NOT NULL,
        type TEXT NOT NULL,
        at_ms INTEGER NOT NULL,
        data TEXT NOT NULL,
        run_key TEXT UNIQUE
      );
      CREATE INDEX IF NOT EXISTS events_by_bot ON events (bot_id, seq);
      CREATE INDEX IF NOT EXISTS events_by_time ON events (at_ms);
      CREATE TABLE IF NOT EXISTS crash_loops (
        bot_id TEXT PRIMARY KEY,
        since_ms INTEGER NOT NULL
      );
      CREATE TABLE IF NOT EXISTS deliveries (
        seq INTEGER PRIMARY KEY,
        bot_id TEXT NOT NULL,
        type TEXT NOT NULL,
        data TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_at_ms INTEGER NOT NULL,
        first_at_ms INTEGER NOT NULL
      );
      CREATE TABLE IF NOT EXISTS forgotten (
        bot_id TEXT PRIMARY KEY,
        at_ms INTEGER NOT NULL
      );
    `);
    this.moveLogsOutOfRecords();
  }

  /**
   * Stores of earlier versions kept each record's logs inside its JSON, escaped
   * (a control byte took six bytes) and up to 4 MiB: they move to a column of
   * their own, bounded, and only the newest records of each bot keep them.
   */
  private moveLogsOutOfRecords(): void {
    const columns = this.db.prepare('PRAGMA table_info(exits)').all();
    if (!columns.some((column) => column.name === 'logs')) this.db.exec("ALTER TABLE exits ADD COLUMN logs TEXT NOT NULL DEFAULT ''");
    const old = this.db.prepare("SELECT seq, bot_id FROM exits WHERE json_extract(record, '$.logs') IS NOT NULL ORDER BY seq DESC").all();
    const recordOf = this.db.prepare('SELECT record FROM exits WHERE seq = ?');
    const kept = new Map<string, number>();
    this.transaction(() => {
      // One record in memory at a time: an old store may hold many of 4 MiB.
      for (const row of old) {
        const { logs, ...record } = JSON.parse(recordOf.get(row.seq as number)?.record as string) as ExitRecord;
        const botId = row.bot_id as string;
        const newer = kept.get(botId) ?? 0;
        kept.set(botId, newer + 1);
        const text = newer < EXITS_KEPT ? fitJson(logs, EXIT_LOG_BYTES) : '';
        this.statement('UPDATE exits SET record = ?, logs = ? WHERE seq = ?').run(JSON.stringify(record), text, row.seq as number);
      }
    });
  }

  close(): void {
    if (this.db.isOpen) this.db.close();
  }

  /** Runs `work` in one transaction. */
  transaction<T>(work: () => T): T {
    this.db.exec('BEGIN IMMEDIATE');
    try {
      const value = work();
      this.db.exec('COMMIT');
      return value;
    } catch (err) {
      this.db.exec('ROLLBACK');
      throw err;
    }
  }

  /**
   * Keeps an exit record, its logs bounded to EXIT_LOG_BYTES (the newest lines);
   * false when one with this `runKey` is kept already. The bot's records past
   * the newest EXITS_KEPT are dropped, but for the time and kind of those of
   * the last hour, which the crash count reads.
   */
  addExit(botId: string, record: ExitRecord, runKey: string): boolean {
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

  /** The bot's newest `limit` exit records (at most EXITS_KEPT), newest first. */
  exits(botId: string, limit: number): ExitRecord[] {
    const rows = this.statement('SELECT record, logs FROM exits WHERE bot_id = ? ORDER BY seq DESC LIMIT ?').all(
      botId,
      Math.min(limit, EXITS_KEPT),
    );
    return rows.map((row) => ({ ...(JSON.parse(row.record as string) as Omit<ExitRecord, 'logs'>), logs: row.logs as string }));
  }

  /**
   * Drops everything kept of the bot (records, events, crash-loop state) and
   * remembers when, so that the end of a run begun before then, reported late,
   * is not taken for a later bot of the same id.
   */
  forget(botId: string, atMs: number): void {
    this.statement('DELETE FROM exits WHERE bot_id = ?').run(botId);
    this.statement('DELETE FROM events WHERE bot_id = ?').run(botId);
    this.statement('DELETE FROM crash_loops WHERE bot_id = ?').run(botId);
    this.statement('INSERT OR REPLACE INTO forgotten (bot_id, at_ms) VALUES (?, ?)').run(botId, atMs);
  }

  /** When the bot was last forgotten (ms); undefined when never. */
  forgottenAt(botId: string): number | undefined {
    return (this.statement('SELECT at_ms FROM forgotten WHERE bot_id = ?').get(botId)?.at_ms as number | undefined) ?? undefined;
  }

  /** Runs of the bot that ended without a request at or after `sinceMs`. */
  crashesSince(botId: string, sinceMs: number): number[] {
    const rows = this.statement('SELECT at_ms FROM exits WHERE bot_id = ? AND requested = 0 AND at_ms >= ? ORDER BY at_ms').all(
      botId,
      sinceMs,
    );
    return rows.map((row) => row.at_ms as number);
  }

  /**
   * Appends an event; `build` makes its data from the cursor it gets. Undefined
   * when an event with this `runKey` is kept already.
   */
  appendEvent(botId: string, type: string, atMs: number, build: (cursor: string) => string, runKey?: string): StoredEvent | undefined {
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

  /** Kept events after `seq`, oldest first, of one bot or of all. */
  eventsAfter(seq: number, botId: string | undefined, limit: number): StoredEvent[] {
    const rows = botId
      ? this.statement('SELECT seq, bot_id, type, data FROM events WHERE bot_id = ? AND seq > ? ORDER BY seq LIMIT ?').all(botId, seq, limit)
      : this.statement('SELECT seq, bot_id, type, data FROM events WHERE seq > ? ORDER BY seq LIMIT ?').all(seq, limit);
    return rows.map((row) => ({ seq: row.seq as number, botId: row.bot_id as string, type: row.type as string, data: row.data as string }));
  }

  /** The bots in the crash-looping state. */
  crashLoopingBots(): string[] {
    return this.statement('SELECT bot_id FROM crash_loops').all().map((row) => row.bot_id as string);
  }

  isCrashLooping(botId: string): boolean {
    return this.statement('SELECT 1 FROM crash_loops WHERE bot_id = ?').get(botId) !== undefined;
  }

  crashLoopingCount(): number {
    return Number(this.statement('SELECT COUNT(*) AS n FROM crash_loops').get()?.n ?? 0);
  }

  setCrashLoop(botId: string, sinceMs: number | undefined): void {
    if (sinceMs === undefined) this.statement('DELETE FROM crash_loops WHERE bot_id = ?').run(botId);
    else this.statement('INSERT OR REPLACE INTO crash_loops (bot_id, since_ms) VALUES (?, ?)').run(botId, sinceMs);
  }

  addDelivery(event: StoredEvent, nowMs: number): void {
    this.statement('INSERT OR IGNORE INTO deliveries (seq, bot_id, type, data, next_at_ms, first_at_ms) VALUES (?, ?, ?, ?, ?, ?)').run(
      event.seq,
      event.botId,
      event.type,
      event.data,
      nowMs,
      nowMs,
    );
  }

  /** The oldest pending delivery of each bot, in the order they fell due. */
  nextDeliveries(limit: number): PendingDelivery[] {
    const rows = this.statement(
      `SELECT d.* FROM deliveries d
         JOIN (SELECT bot_id, MIN(seq) AS seq FROM deliveries GROUP BY bot_id) first ON first.seq = d.seq
         ORDER BY d.next_at_ms LIMIT ?`,
    ).all(limit);
    return rows.map((row) => ({
      seq: row.seq as number,
      botId: row.bot_id as string,
      type: row.type as string,
      data: row.data as string,
      attempts: row.attempts as number,
      nextAtMs: row.next_at_ms as number,
      firstAtMs: row.first_at_ms as number,
    }));
  }

  deliveryDone(seq: number): void {
    this.statement('DELETE FROM deliveries WHERE seq = ?').run(seq);
  }

  deliveryFailed(seq: number, attempts: number, nextAtMs: number): void {
    this.statement('UPDATE deliveries SET attempts = ?, next_at_ms = ? WHERE seq = ?').run(attempts, nextAtMs, seq);
  }

  /** When the newest run start or end that is kept happened (ms), for a runtime that can replay what came after. */
  lastRunEventMs(): number | undefined {
    const row = this.statement('SELECT MAX(at_ms) AS at_ms FROM events WHERE run_key IS NOT NULL').get();
    return (row?.at_ms as number | null | undefined) ?? undefined;
  }

  private pruneNow(): void {
    this.writes += 1;
    if (this.writes % PRUNE_EVERY !== 0) return;
    const newest = Number(this.statement('SELECT COALESCE(MAX(seq), 0) AS seq FROM events').get()?.seq ?? 0);
    this.statement('DELETE FROM events WHERE (seq <= ? AND at_ms < ?) OR seq <= ?').run(
      newest - EVENTS_KEPT,
      Date.now() - EVENTS_KEPT_MS,
      newest - EVENTS_MAX,
    );
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
