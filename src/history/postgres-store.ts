import pg from 'pg';
import { fitJson } from '../json-text.js';
import type { Rows, SqlPort } from './sql-port.js';
import { cursorOf, deliveryOf, placementOf, storedNodeOf, eventOf, exitOf, revisionOf, tableRecordsOf, WritesInTransactions, EVENTS_KEPT, EVENTS_KEPT_MS, EVENTS_MAX, EXIT_LOG_BYTES, EXITS_KEPT, HOUR_MS, PRUNE_EVERY, REVISIONS_KEPT } from './history-store.js';
import type { SharedStateStore } from '../shared/shared-state.js';
import type { ExitRecord, HistoryStore, HistoryTx, KeptRecord, OpenTx, NodeBot, NodeRecord, PendingDelivery, Placement, StoredNode, RevisionRecord, StoredEvent, TableRecord } from './history-store.js';
import { connectionSettings, isDatabaseAway } from './postgres-database.js';
import type { PostgresDatabase, Query } from './postgres-database.js';

/** The channel every agent listens on for events another one kept. */
const CHANNEL = 'bot_agent_events';
/** How long the listening connection waits before it connects again after it was lost. */
const RELISTEN_MS = 1_000;
/** How often the listening connection is checked with a round trip, and how soon it must answer (any of its queries). */
const LISTEN_CHECK_MS = 3_000;
const LISTEN_CHECK_TIMEOUT_MS = 2_000;
/** How many events one read of the feed takes. */
const FEED_PAGE = 500;

/** The event counter as a transaction holds it: the last cursor given, and whether an event was kept since its start. */
interface EventCounter {
  last: number;
  appended: boolean;
}

/**
 * The history shared by several agents in one PostgreSQL database
 * (AGENT_DATABASE_URL). Run ends and events are kept once whichever agent
 * reports them (a unique key per run). Event cursors come from one counter row
 * that each writing transaction updates and holds until it commits, so cursors
 * are committed in order: a reader never passes an event that commits later
 * with a smaller cursor. Each committed event is announced with NOTIFY, and
 * every agent reads what follows its last one.
 */
export class PostgresHistoryStore extends WritesInTransactions implements HistoryStore, SharedStateStore {
  private readonly listeners = new Set<(event: StoredEvent) => void>();
  private listener: pg.Client | undefined;
  /** The cursor of the last event handed to subscribers; undefined until the feed first reached the database. */
  private fed: number | undefined;
  private feeding: Promise<void> = Promise.resolve();
  private relisten: NodeJS.Timeout | undefined;
  private refeed: NodeJS.Timeout | undefined;
  private writes = 0;
  private closed = false;
  /** Whether the loss of the feed was reported: once an outage, not once a second. */
  private feedLost = false;
  private readonly listening: Promise<void>;
  private heard: () => void = () => undefined;

  constructor(
    private readonly database: PostgresDatabase,
    private readonly report: (what: string, err: unknown) => void = () => undefined,
  ) {
    super();
    this.listening = new Promise((resolve) => (this.heard = resolve));
    void this.listen();
  }

  /**
   * Resolves once the schema is migrated and the feed of other agents' events
   * listens; rejects while the database is away (a later call tries again).
   */
  async opened(): Promise<void> {
    await this.database.opened();
    await this.listening;
  }

  get reachable(): boolean {
    return this.database.up;
  }

  isAway(err: unknown): boolean {
    return isDatabaseAway(err);
  }

  /**
   * Listens for events kept by any agent. The connection is checked with a
   * round trip every LISTEN_CHECK_MS: one lost without a word (its host gone, an
   * idle time-out on the way) is noticed within seconds. A lost connection is
   * made again, and what was missed meanwhile is read then.
   */
  private async listen(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({ ...connectionSettings(this.database.url), query_timeout: LISTEN_CHECK_TIMEOUT_MS });
    let check: NodeJS.Timeout | undefined;
    const again = (err: unknown): void => {
      clearInterval(check);
      if (this.listener !== client) return;
      this.listener = undefined;
      client.end().catch(() => undefined);
      if (this.closed) return;
      if (!this.feedLost) this.report('the database event feed was lost; listening again', err);
      this.feedLost = true;
      this.relisten = setTimeout(() => void this.listen(), RELISTEN_MS);
    };
    this.listener = client;
    client.on('error', again);
    client.on('end', () => again(new Error('connection ended')));
    client.on('notification', () => this.feed());
    try {
      await this.database.opened();
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
      if (this.fed === undefined) this.fed = Number((await client.query('SELECT n FROM event_counter')).rows[0]?.n ?? 0);
    } catch (err) {
      again(err);
      return;
    }
    check = setInterval(() => void client.query('SELECT 1').catch(again), LISTEN_CHECK_MS).unref();
    this.feedLost = false;
    this.heard();
    this.feed();
  }

  /** Hands subscribers every event committed after the last one they got, in cursor order. */
  private feed(): void {
    this.feeding = this.feeding.then(async () => {
      for (;;) {
        if (this.closed || this.fed === undefined) return;
        // Over the listening connection, known to answer (checked every LISTEN_CHECK_MS), else the pool's.
        const listener = this.listener;
        const query: Query = listener ? (text, values) => listener.query(text, values) : await this.database.query();
        const { rows } = await query('SELECT seq, bot_id, type, data FROM events WHERE seq > $1 ORDER BY seq LIMIT $2', [this.fed, FEED_PAGE]);
        for (const row of rows) {
          const event = eventOf(row);
          this.fed = event.seq;
          for (const listener of this.listeners) listener(event);
        }
        if (rows.length < FEED_PAGE) return;
      }
    }).catch((err: unknown) => {
      // Read again soon: no notification may come to wake it for what was missed.
      if (!this.feedLost) this.report('the database event feed could not be read; reading again', err);
      this.refeed ??= setTimeout(() => {
        this.refeed = undefined;
        this.feed();
      }, RELISTEN_MS);
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.relisten);
    clearTimeout(this.refeed);
    this.listeners.clear();
    await this.feeding;
    const listener = this.listener;
    this.listener = undefined;
    await listener?.end().catch(() => undefined);
    await this.database.close();
  }

  subscribe(listener: (event: StoredEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Every writing transaction takes the event counter's row first: one lock
   * order for all (the counter, then the rows it writes), so that no two
   * transactions, of one agent or two, ever wait on each other in a cycle.
   */
  transaction<T>(work: (tx: OpenTx) => Promise<T>): Promise<T> {
    return this.database.inTransaction(async (query) => {
      const { rows } = await query('SELECT n FROM event_counter FOR UPDATE');
      // The counter is this transaction's alone until it ends: each event's cursor is known before it is written.
      const counter: EventCounter = { last: Number(rows[0]?.n ?? 0), appended: false };
      const part = async <P>(partWork: () => Promise<P>): Promise<P> => {
        const mark = counter.last;
        await query('SAVEPOINT part');
        try {
          const value = await partWork();
          await query('RELEASE SAVEPOINT part');
          return value;
        } catch (err) {
          // A connection lost fails the whole transaction: the rollback's own failure says so to the caller.
          if (err instanceof pg.DatabaseError) await query('ROLLBACK TO SAVEPOINT part; RELEASE SAVEPOINT part');
          counter.last = mark;
          throw err;
        }
      };
      const value = await work({ ...this.txOn(query, counter), part });
      // Listeners are told once a transaction, however many events it keeps: delivered when it commits.
      if (counter.appended) await query(`SELECT pg_notify('${CHANNEL}', '')`);
      return value;
    });
  }

  async exits(botId: string, limit: number): Promise<ExitRecord[]> {
    return this.txOn(await this.query()).exits(botId, limit);
  }

  async crashesSince(botId: string, sinceMs: number): Promise<number[]> {
    return this.txOn(await this.query()).crashesSince(botId, sinceMs);
  }

  async revisions(botId: string, limit: number): Promise<RevisionRecord[]> {
    return this.txOn(await this.query()).revisions(botId, limit);
  }

  async renewNode(name: string, url: string | null, atMs: number, seal: string | null): Promise<void> {
    await (await this.query())(
      'INSERT INTO nodes (name, url, alive_ms, seal) VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO UPDATE SET url = excluded.url, alive_ms = excluded.alive_ms, seal = excluded.seal',
      [name, url, atMs, seal],
    );
  }

  async putNodeBots(name: string, bots: readonly NodeBot[], atMs: number): Promise<void> {
    const ids = bots.map((bot) => bot.botId);
    await this.database.inTransaction(async (query) => {
      await query('DELETE FROM node_bots WHERE node = $1 AND NOT (bot_id = ANY($2))', [name, ids]);
      await query(
        `INSERT INTO node_bots (bot_id, node, running, seen_ms) SELECT b, $1, r, $4 FROM unnest($2::text[], $3::boolean[]) AS t(b, r)
         ON CONFLICT (bot_id) DO UPDATE SET node = excluded.node, running = excluded.running, seen_ms = excluded.seen_ms`,
        [name, ids, bots.map((bot) => bot.running), atMs],
      );
    });
  }

  async nodeOfBot(botId: string): Promise<StoredNode | undefined> {
    const { rows } = await (await this.query())(
      // The fleet's placement first: a leftover copy a cut move left elsewhere is not the bot.
      `SELECT n.name, n.url, n.alive_ms, n.seal FROM nodes n
       WHERE n.name = COALESCE((SELECT node FROM placements WHERE bot_id = $1), (SELECT node FROM node_bots WHERE bot_id = $1))`,
      [botId],
    );
    const row = rows[0];
    return row && storedNodeOf(row);
  }

  async botsOfNode(name: string): Promise<NodeBot[]> {
    const { rows } = await (await this.query())('SELECT bot_id, running FROM node_bots WHERE node = $1 ORDER BY bot_id', [name]);
    return rows.map((row) => ({ botId: row.bot_id as string, running: row.running === true }));
  }

  /** Statements and transactions for a room of its own (the schedules), on this store's pool. */
  sql(): SqlPort {
    return {
      query: async (text, values) => (await (await this.database.query())(text, values as unknown[])).rows as Rows,
      transaction: (work) => this.database.inTransaction((query) => work(async (text, values) => (await query(text, values as unknown[])).rows as Rows)),
    };
  }

  async placementsOf(botIds: readonly string[]): Promise<Placement[]> {
    const { rows } = await (await this.query())('SELECT bot_id, node, generation, start_pending FROM placements WHERE bot_id = ANY($1) ORDER BY bot_id', [botIds]);
    return rows.map(placementOf);
  }

  async place(botId: string, from: Placement | undefined, node: string, startPending: boolean, atMs: number): Promise<Placement | undefined> {
    const generation = (from?.generation ?? 0) + 1;
    const { rows } = await (await this.query())(
      from === undefined
        ? 'INSERT INTO placements (bot_id, node, generation, start_pending, placed_ms) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (bot_id) DO NOTHING RETURNING bot_id, node, generation, start_pending'
        : 'UPDATE placements SET node = $2, generation = $3, start_pending = $4, placed_ms = $5 WHERE bot_id = $1 AND generation = $6 RETURNING bot_id, node, generation, start_pending',
      from === undefined ? [botId, node, generation, startPending, atMs] : [botId, node, generation, startPending, atMs, from.generation],
    );
    return rows[0] && placementOf(rows[0]);
  }

  async placementStarted(botId: string, generation: number): Promise<void> {
    await (await this.query())('UPDATE placements SET start_pending = false WHERE bot_id = $1 AND generation = $2', [botId, generation]);
  }

  async nodes(): Promise<NodeRecord[]> {
    const { rows } = await (await this.query())(
      `SELECT n.name, n.url, n.alive_ms, n.seal, COUNT(b.bot_id) AS bots, COUNT(b.bot_id) FILTER (WHERE b.running) AS running
       FROM nodes n LEFT JOIN node_bots b ON b.node = n.name GROUP BY n.name, n.url, n.alive_ms, n.seal ORDER BY n.name`,
    );
    return rows.map((row) => ({ ...storedNodeOf(row), bots: Number(row.bots), running: Number(row.running) }));
  }

  async deployingRevisions(): Promise<{ botId: string; revision: number; atMs: number }[]> {
    const { rows } = await (await this.query())("SELECT bot_id, revision, made_at_ms FROM revisions WHERE outcome = 'deploying'");
    return rows.map((row) => ({ botId: row.bot_id as string, revision: Number(row.revision), atMs: Number(row.made_at_ms) }));
  }

  async eventData(key: string): Promise<string | undefined> {
    return this.txOn(await this.query()).eventData(key);
  }

  async lastEventAt(botId: string, types: readonly string[]): Promise<number | undefined> {
    return this.txOn(await this.query()).lastEventAt(botId, types);
  }

  async isCrashLooping(botId: string): Promise<boolean> {
    return this.txOn(await this.query()).isCrashLooping(botId);
  }

  /** One statement, not four: a status read takes one of the pool's connections, once. */
  override async botRecord(botId: string, sinceMs: number): Promise<KeptRecord> {
    const { rows } = await (await this.query())(
      `SELECT e.record, e.logs, EXISTS (SELECT 1 FROM crash_loops WHERE bot_id = $1) AS looping,
         ARRAY(SELECT at_ms FROM exits WHERE bot_id = $1 AND NOT requested AND at_ms >= $2 ORDER BY at_ms) AS crashes, g.since_ms, g.ended_ms
       FROM (SELECT 1) AS one
       LEFT JOIN LATERAL (SELECT record, logs FROM exits WHERE bot_id = $1 ORDER BY seq DESC LIMIT 1) AS e ON true
       LEFT JOIN given_up AS g ON g.bot_id = $1`,
      [botId, sinceMs],
    );
    const row = rows[0] ?? {};
    return {
      lastExit: row.record === null || row.record === undefined ? null : exitOf(row.record as string, row.logs as string),
      crashLooping: row.looping === true,
      crashes: ((row.crashes ?? []) as unknown[]).map(Number),
      givenUp: row.since_ms === null || row.since_ms === undefined ? undefined : { sinceMs: Number(row.since_ms), endedMs: row.ended_ms === null ? undefined : Number(row.ended_ms) },
    };
  }

  async tableRecords(botIds: readonly string[], sinceMs: number): Promise<Map<string, TableRecord>> {
    const query = await this.query();
    const ids = [...botIds];
    const [lastExits, counts, looping, givenUp] = await Promise.all([
      query('SELECT DISTINCT ON (bot_id) bot_id, record FROM exits WHERE bot_id = ANY($1) ORDER BY bot_id, seq DESC', [ids]),
      query('SELECT bot_id, COUNT(*) FILTER (WHERE NOT requested) AS crashes, COUNT(*) AS ends FROM exits WHERE bot_id = ANY($1) AND at_ms >= $2 GROUP BY bot_id', [ids, sinceMs]),
      query('SELECT bot_id FROM crash_loops WHERE bot_id = ANY($1)', [ids]),
      query('SELECT bot_id, since_ms, ended_ms FROM given_up WHERE bot_id = ANY($1)', [ids]),
    ]);
    return tableRecordsOf({ lastExits: lastExits.rows, counts: counts.rows, looping: looping.rows, givenUp: givenUp.rows });
  }

  async forgottenAt(botId: string): Promise<number | undefined> {
    const { rows } = await (await this.query())('SELECT at_ms FROM forgotten WHERE bot_id = $1', [botId]);
    return rows[0] === undefined ? undefined : Number(rows[0].at_ms);
  }

  async forgottenAtOf(botIds: readonly string[]): Promise<Map<string, number>> {
    if (botIds.length === 0) return new Map();
    const { rows } = await (await this.query())('SELECT bot_id, at_ms FROM forgotten WHERE bot_id = ANY($1)', [[...botIds]]);
    return new Map(rows.map((row) => [row.bot_id as string, Number(row.at_ms)]));
  }

  async eventsAfter(seq: number, botId: string | undefined, limit: number): Promise<StoredEvent[]> {
    const query = await this.query();
    const { rows } = botId
      ? await query('SELECT seq, bot_id, type, data FROM events WHERE bot_id = $1 AND seq > $2 ORDER BY seq LIMIT $3', [botId, seq, limit])
      : await query('SELECT seq, bot_id, type, data FROM events WHERE seq > $1 ORDER BY seq LIMIT $2', [seq, limit]);
    return rows.map(eventOf);
  }

  async latestOfType(type: string, among: readonly string[], sinceMs: number, botIds?: readonly string[]): Promise<StoredEvent[]> {
    const latest = 'e.type = $2 AND e.seq = (SELECT MAX(x.seq) FROM events x WHERE x.bot_id = e.bot_id AND x.type = ANY($3))';
    const { rows } = await (await this.query())(
      botIds === undefined
        ? `SELECT seq, bot_id, type, data FROM events e WHERE e.at_ms >= $1 AND ${latest} ORDER BY e.seq`
        : `SELECT seq, bot_id, type, data FROM events e WHERE e.bot_id = ANY($4) AND e.at_ms >= $1 AND ${latest} ORDER BY e.seq`,
      botIds === undefined ? [sinceMs, type, [...among]] : [sinceMs, type, [...among], [...botIds]],
    );
    return rows.map(eventOf);
  }

  async crashLoopingBots(): Promise<string[]> {
    const { rows } = await (await this.query())('SELECT bot_id FROM crash_loops');
    return rows.map((row) => row.bot_id as string);
  }

  async crashLoopingCount(): Promise<number> {
    const { rows } = await (await this.query())('SELECT COUNT(*) AS n FROM crash_loops');
    return Number(rows[0]?.n ?? 0);
  }

  async claimDeliveries(nowMs: number, limit: number, holdMs: number): Promise<PendingDelivery[]> {
    // SKIP LOCKED: agents claiming at once take different deliveries, none waits on another.
    const { rows } = await (await this.query())(
      `UPDATE deliveries SET claimed_until_ms = $1 WHERE seq IN (
         SELECT d.seq FROM deliveries d
          WHERE d.next_at_ms <= $2 AND d.claimed_until_ms <= $2
            AND NOT EXISTS (SELECT 1 FROM deliveries e WHERE e.bot_id = d.bot_id AND e.seq < d.seq)
          ORDER BY d.next_at_ms LIMIT $3
          FOR UPDATE SKIP LOCKED)
       RETURNING *`,
      [nowMs + holdMs, nowMs, limit],
    );
    return rows.map(deliveryOf).sort((a, b) => a.nextAtMs - b.nextAtMs);
  }

  async nextDeliveryAt(): Promise<number | undefined> {
    const { rows } = await (await this.query())(
      `SELECT MIN(GREATEST(d.next_at_ms, d.claimed_until_ms)) AS at_ms FROM deliveries d
        WHERE NOT EXISTS (SELECT 1 FROM deliveries e WHERE e.bot_id = d.bot_id AND e.seq < d.seq)`,
    );
    return rows[0]?.at_ms == null ? undefined : Number(rows[0].at_ms);
  }

  async deliveryDone(seq: number): Promise<void> {
    await (await this.query())('DELETE FROM deliveries WHERE seq = $1', [seq]);
  }

  async deliveryFailed(seq: number, attempts: number, nextAtMs: number, doneTargets: readonly string[] = []): Promise<void> {
    await (await this.query())('UPDATE deliveries SET attempts = $1, next_at_ms = $2, claimed_until_ms = 0, done_targets = $3 WHERE seq = $4', [attempts, nextAtMs, doneTargets.join(','), seq]);
  }

  async lastRunEventMs(): Promise<number | undefined> {
    const { rows } = await (await this.query())("SELECT MAX(at_ms) AS at_ms FROM events WHERE run_key IS NOT NULL AND type IN ('started', 'exited')");
    return rows[0]?.at_ms == null ? undefined : Number(rows[0].at_ms);
  }

  async endSession(nonce: string, untilMs: number, nowMs: number): Promise<void> {
    const query = await this.query();
    await query('DELETE FROM ended_sessions WHERE until_ms <= $1', [nowMs]);
    await query('INSERT INTO ended_sessions (nonce, until_ms) VALUES ($1, $2) ON CONFLICT (nonce) DO NOTHING', [nonce, untilMs]);
  }

  async sessionEnded(nonce: string): Promise<boolean> {
    const { rows } = await (await this.query())('SELECT 1 FROM ended_sessions WHERE nonce = $1', [nonce]);
    return rows.length > 0;
  }

  /** Queries on any of the pool's connections, once the schema is migrated. */
  private query(): Promise<Query> {
    return this.database.query();
  }

  private txOn(query: Query, counter?: EventCounter): HistoryTx {
    return {
      addExit: async (botId, record, runKey) => {
        const { logs, ...fields } = record;
        // One statement: the record, and the bot's older ones past EXITS_KEPT (the new one is the newest) dropped but
        // for the time and kind of those of the last hour, which the crash count reads. Each of its parts sees the
        // table as it was before it, without the new record.
        const { rows } = await query(
          `WITH added AS (
             INSERT INTO exits (bot_id, at_ms, requested, record, run_key, logs) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (run_key) DO NOTHING RETURNING seq
           ), older AS (
             SELECT seq, at_ms FROM exits WHERE bot_id = $1 AND EXISTS (SELECT 1 FROM added) ORDER BY seq DESC OFFSET ${EXITS_KEPT - 1}
           ), dropped AS (
             DELETE FROM exits WHERE seq IN (SELECT seq FROM older WHERE at_ms < $7)
           ), emptied AS (
             UPDATE exits SET record = '{}', logs = '' WHERE logs != '' AND seq IN (SELECT seq FROM older WHERE at_ms >= $7)
           )
           SELECT COUNT(*)::int AS added FROM added`,
          [botId, Date.parse(record.at), record.requested, JSON.stringify(fields), runKey, fitJson(logs, EXIT_LOG_BYTES), Date.now() - HOUR_MS],
        );
        return Number(rows[0]?.added ?? 0) > 0;
      },
      exits: async (botId, limit) => {
        const { rows } = await query('SELECT record, logs FROM exits WHERE bot_id = $1 ORDER BY seq DESC LIMIT $2', [botId, Math.min(limit, EXITS_KEPT)]);
        return rows.map((row) => exitOf(row.record as string, row.logs as string));
      },
      putRevision: async (botId, record) => {
        const { rowCount } = await query(
          `INSERT INTO revisions (bot_id, revision, spec, made_by, made_at_ms, outcome, reason, ended_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
           ON CONFLICT (bot_id, revision) DO UPDATE SET outcome = EXCLUDED.outcome, reason = EXCLUDED.reason, ended_at_ms = EXCLUDED.ended_at_ms
           WHERE revisions.outcome <> EXCLUDED.outcome`,
          [botId, record.revision, JSON.stringify(record.spec), record.by, Date.parse(record.at), record.outcome, record.reason, record.ended_at === null ? null : Date.parse(record.ended_at)],
        );
        await query(`DELETE FROM revisions WHERE bot_id = $1 AND revision <= (SELECT MAX(revision) FROM revisions WHERE bot_id = $1) - ${REVISIONS_KEPT}`, [botId]);
        return (rowCount ?? 0) > 0;
      },
      revisions: async (botId, limit) => {
        const { rows } = await query('SELECT * FROM revisions WHERE bot_id = $1 ORDER BY revision DESC LIMIT $2', [botId, limit]);
        return rows.map((row) => revisionOf(row as Record<string, unknown>));
      },
      eventData: async (key) => {
        const { rows } = await query('SELECT data FROM events WHERE run_key = $1', [key]);
        return rows[0]?.data as string | undefined;
      },
      lastEventAt: async (botId, types) => {
        const { rows } = await query('SELECT MAX(at_ms) AS at_ms FROM events WHERE bot_id = $1 AND type = ANY($2)', [botId, [...types]]);
        return rows[0]?.at_ms === null || rows[0]?.at_ms === undefined ? undefined : Number(rows[0].at_ms);
      },
      crashesSince: async (botId, sinceMs) => {
        const { rows } = await query('SELECT at_ms FROM exits WHERE bot_id = $1 AND NOT requested AND at_ms >= $2 ORDER BY at_ms', [botId, sinceMs]);
        return rows.map((row) => Number(row.at_ms));
      },
      appendEvent: async (botId, type, atMs, build, runKey, deliverAtMs) => {
        if (counter === undefined) throw new Error('an event is appended in a transaction only');
        // The counter row stays locked until this transaction ends: cursors commit in order. It counts on
        // whether the event is kept or not (a run key kept already), as it always has: a cursor skipped.
        const seq = (counter.last += 1);
        const data = build(cursorOf(seq));
        // One statement: the event, and its delivery when asked.
        const { rows } = await query(
          `WITH next AS (UPDATE event_counter SET n = n + 1 RETURNING n), added AS (
             INSERT INTO events (seq, bot_id, type, at_ms, data, run_key) SELECT n, $1, $2, $3, $4, $5 FROM next
             ON CONFLICT (run_key) DO NOTHING RETURNING seq
           ), queued AS (
             INSERT INTO deliveries (seq, bot_id, type, data, next_at_ms, first_at_ms) SELECT seq, $1, $2, $4, $6, $6 FROM added WHERE $6::bigint IS NOT NULL
             ON CONFLICT DO NOTHING
           )
           SELECT seq FROM added`,
          [botId, type, atMs, data, runKey ?? null, deliverAtMs ?? null],
        );
        if (rows.length === 0) return undefined;
        if (Number(rows[0].seq) !== seq) throw new Error(`the event counter moved under a transaction that holds it (${seq}, ${String(rows[0].seq)})`);
        counter.appended = true;
        await this.pruneNow(query, seq);
        return { seq, botId, type, data };
      },
      isCrashLooping: async (botId) => (await query('SELECT 1 FROM crash_loops WHERE bot_id = $1', [botId])).rows.length > 0,
      startCrashLoop: async (botId, sinceMs) =>
        ((await query('INSERT INTO crash_loops (bot_id, since_ms) VALUES ($1, $2) ON CONFLICT DO NOTHING', [botId, sinceMs])).rowCount ?? 0) > 0,
      endCrashLoop: async (botId) => ((await query('DELETE FROM crash_loops WHERE bot_id = $1', [botId])).rowCount ?? 0) > 0,
      givenUp: async (botId) => {
        const row = (await query('SELECT since_ms, ended_ms FROM given_up WHERE bot_id = $1', [botId])).rows[0];
        return row === undefined ? undefined : { sinceMs: Number(row.since_ms), endedMs: row.ended_ms === null ? undefined : Number(row.ended_ms) };
      },
      giveUp: async (botId, sinceMs) => {
        await query('INSERT INTO given_up (bot_id, since_ms) VALUES ($1, $2) ON CONFLICT (bot_id) DO UPDATE SET since_ms = EXCLUDED.since_ms, ended_ms = NULL', [botId, sinceMs]);
      },
      endGiveUp: async (botId, atMs) => {
        await query('UPDATE given_up SET ended_ms = $1 WHERE bot_id = $2 AND ended_ms IS NULL AND since_ms <= $1', [atMs, botId]);
      },
      botChats: async (botId) => {
        const row = (await query('SELECT chats FROM bot_chats WHERE bot_id = $1', [botId])).rows[0];
        return row === undefined ? undefined : String(row.chats);
      },
      setBotChats: async (botId, chats, atMs) => {
        if (chats === undefined) await query('DELETE FROM bot_chats WHERE bot_id = $1', [botId]);
        else
          await query(
            'INSERT INTO bot_chats (bot_id, chats, set_ms) VALUES ($1, $2, $3) ON CONFLICT (bot_id) DO UPDATE SET chats = EXCLUDED.chats, set_ms = EXCLUDED.set_ms',
            [botId, chats, atMs],
          );
      },
      addDelivery: async (event, nowMs) => {
        await query(
          'INSERT INTO deliveries (seq, bot_id, type, data, next_at_ms, first_at_ms) VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT DO NOTHING',
          [event.seq, event.botId, event.type, event.data, nowMs],
        );
      },
      forget: async (botId, atMs) => {
        // What happened up to the removal: a removal written again late (a spool replayed) leaves a later bot's alone.
        await query('DELETE FROM exits WHERE bot_id = $1 AND at_ms <= $2', [botId, atMs]);
        await query('DELETE FROM events WHERE bot_id = $1 AND at_ms <= $2', [botId, atMs]);
        await query('DELETE FROM crash_loops WHERE bot_id = $1 AND since_ms <= $2', [botId, atMs]);
        await query('DELETE FROM given_up WHERE bot_id = $1 AND since_ms <= $2', [botId, atMs]);
        await query('DELETE FROM bot_chats WHERE bot_id = $1 AND set_ms <= $2', [botId, atMs]);
        await query('DELETE FROM revisions WHERE bot_id = $1 AND made_at_ms <= $2', [botId, atMs]);
        await query('DELETE FROM placements WHERE bot_id = $1 AND placed_ms <= $2', [botId, atMs]);
        await query('DELETE FROM schedule_runs WHERE bot_id = $1', [botId]);
        await query('DELETE FROM schedules WHERE bot_id = $1 AND created_ms <= $2', [botId, atMs]);
        await query(
          'INSERT INTO forgotten (bot_id, at_ms) VALUES ($1, $2) ON CONFLICT (bot_id) DO UPDATE SET at_ms = GREATEST(forgotten.at_ms, EXCLUDED.at_ms)',
          [botId, atMs],
        );
      },
    };
  }

  private async pruneNow(query: Query, newest: number): Promise<void> {
    this.writes += 1;
    if (this.writes % PRUNE_EVERY !== 0) return;
    await query('DELETE FROM events WHERE (seq <= $1 AND at_ms < $2) OR seq <= $3', [newest - EVENTS_KEPT, Date.now() - EVENTS_KEPT_MS, newest - EVENTS_MAX]);
  }
}
