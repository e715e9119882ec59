import pg from 'pg';
import { migrateAsync, SCHEMA_VERSION_TABLE } from './migrations.js';

/** One statement, on whichever connection its caller holds. */
export type Query = (text: string, values?: unknown[]) => Promise<pg.QueryResult>;

/** The advisory lock agents starting together take, so that one migrates and the others find it done. */
const MIGRATION_LOCK = 8123001;
/**
 * No statement, and no wait for a connection, outlasts these: a server that is
 * stopped, frozen or cut off fails a query within seconds, not when TCP gives up.
 */
const CONNECT_TIMEOUT_MS = 2_000;
const QUERY_TIMEOUT_MS = 5_000;
/** A transaction left open by an agent that froze is ended by the server, its locks freed. */
const IDLE_IN_TRANSACTION_MS = 10_000;
/** How soon after failing to open the database a caller tries again. */
const REOPEN_AFTER_MS = 1_000;

/** The settings of every connection the agent makes: its pool's and its listener's. */
export function connectionSettings(url: string): pg.ClientConfig {
  return {
    connectionString: url,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    query_timeout: QUERY_TIMEOUT_MS,
    statement_timeout: QUERY_TIMEOUT_MS,
    lock_timeout: QUERY_TIMEOUT_MS,
    idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_MS,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
  };
}

/**
 * Whether `err` says the database is away (not reached, not answering in time,
 * shutting down, out of resources, or a transaction it aborted and that may run
 * again), rather than that it refused this statement for good.
 */
export function isDatabaseAway(err: unknown): boolean {
  if (err instanceof pg.DatabaseError) return !answered(err) || /^40/.test(err.code ?? '');
  // Anything else failed here, before the server: a write the agent cannot even send is refused for good, not
  // tried again for ever as if the database were away.
  return connectionFailed(err);
}

/** Whether the server answered `err` (it runs and is not shutting down, out of resources or too slow). */
function answered(err: unknown): boolean {
  return err instanceof pg.DatabaseError && !/^(08|53|57|58)/.test(err.code ?? '');
}

/**
 * pg's own words for a connection lost, never made or silent, or for its pool or client closed (the agent stopping:
 * its writes are kept in the spool for its next start); its errors carry no code.
 */
const CONNECTION_LOST = /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Query read timeout|connection ended|Cannot use a pool after calling end|Client was closed)/;

/** Whether `err` is a connection's failure: a socket's (ECONNREFUSED, ECONNRESET, ETIMEDOUT, ...) or pg's words for one. */
function connectionFailed(err: unknown): boolean {
  if (err instanceof AggregateError) return err.errors.some(connectionFailed);
  const code = (err as NodeJS.ErrnoException | null)?.code;
  if (typeof code === 'string' && /^E[A-Z0-9_]+$/.test(code)) return true;
  return err instanceof Error && CONNECTION_LOST.test(err.message);
}

/**
 * The PostgreSQL database several agents share (AGENT_DATABASE_URL): a pool of
 * connections, opened once its schema is the newest this agent knows.
 */
export class PostgresDatabase {
  readonly pool: pg.Pool;
  /** Whether the last statement, or the last try to open, reached the server. */
  up = false;
  private ready: Promise<void>;
  private openedOnce = false;
  private failedAt = 0;

  constructor(
    readonly url: string,
    report: (what: string, err: unknown) => void = () => undefined,
  ) {
    this.pool = new pg.Pool({ ...connectionSettings(url), max: 10, idleTimeoutMillis: 30_000 });
    this.pool.on('error', (err) => report('a database connection failed', err));
    this.ready = this.open();
  }

  /**
   * Resolves once the schema is migrated; rejects while the database cannot be
   * reached. A later call tries again: an agent started while the database
   * was away opens it once it answers.
   */
  opened(): Promise<void> {
    if (!this.openedOnce && this.failedAt > 0 && Date.now() - this.failedAt >= REOPEN_AFTER_MS) {
      this.failedAt = 0;
      this.ready = this.open();
    }
    return this.ready;
  }

  /** Queries on any of the pool's connections, once the schema is migrated. */
  async query(): Promise<Query> {
    await this.opened();
    return (text, values) => this.noted(this.pool.query(text, values));
  }

  /** Runs `work` in one transaction, once the schema is migrated: all of its writes are kept, or none. */
  async inTransaction<T>(work: (query: Query) => Promise<T>): Promise<T> {
    await this.opened();
    return this.noted(this.inTransactionNow(work));
  }

  async close(): Promise<void> {
    await this.ready.catch(() => undefined);
    await this.pool.end();
  }

  private open(): Promise<void> {
    const opening = this.noted(this.inTransactionNow((query) => migrate(query))).then(
      () => {
        this.openedOnce = true;
      },
      (err: unknown) => {
        this.failedAt = Date.now();
        throw err;
      },
    );
    // Whoever uses the database hears of a failure to open it; it is not also an unhandled rejection.
    opening.catch(() => undefined);
    return opening;
  }

  /** Notes from a statement's outcome whether the database is up. */
  private async noted<T>(statement: Promise<T>): Promise<T> {
    try {
      const value = await statement;
      this.up = true;
      return value;
    } catch (err) {
      // A failure of the agent's own (a value it could not send) says nothing of the server.
      if (err instanceof pg.DatabaseError || connectionFailed(err)) this.up = answered(err);
      throw err;
    }
  }

  private async inTransactionNow<T>(work: (query: Query) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken: unknown;
    // The pool stops listening for a connection's errors while it is lent out: a connection lost meanwhile
    // (the server stopped or killed it) would be an uncaught 'error' that ends the agent. Its statements fail.
    const lost = (err: Error): void => {
      broken = err;
    };
    client.on('error', lost);
    try {
      await client.query('BEGIN');
      const value = await work((text, values) => client.query(text, values));
      await client.query('COMMIT');
      return value;
    } catch (err) {
      // A connection that failed or did not answer is dropped, never handed out again; the server then ends its transaction.
      if (!(err instanceof pg.DatabaseError)) broken = err;
      else await client.query('ROLLBACK').catch((rollbackErr: unknown) => (broken = rollbackErr));
      throw err;
    } finally {
      client.off('error', lost);
      client.release(broken === undefined ? undefined : broken instanceof Error ? broken : true);
    }
  }
}

/** Applies the migrations the database has not had (migrations/postgres), under a lock held until they commit. */
async function migrate(query: Query): Promise<void> {
  await query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
  await migrateAsync({
    dialect: 'postgres',
    recordedVersion: async () => {
      await query(SCHEMA_VERSION_TABLE);
      return Number((await query('SELECT COALESCE(MAX(version), 0) AS v FROM schema_version')).rows[0]?.v ?? 0);
    },
    versionBeforeMigrations: () => versionBeforeMigrations(query),
    apply: async (migration) => void (await query(migration.sql)),
    record: async (migration, atMs) =>
      void (await query('INSERT INTO schema_version (version, name, applied_at_ms) VALUES ($1, $2, $3)', [migration.version, migration.name, atMs])),
  });
}

/** The version of a database made before the store kept one (each shape a release wrote); 0 for a new one. */
async function versionBeforeMigrations(query: Query): Promise<number> {
  const { rows } = await query("SELECT to_regclass('exits') IS NOT NULL AS exits, to_regclass('operations') IS NOT NULL AS operations");
  if (!rows[0]?.exits) return 0;
  return rows[0]?.operations ? 2 : 1;
}
