import pg from 'pg';
import { migrationsOf, SCHEMA_VERSION_TABLE } from './migrations.js';
import type { Migration } from './migrations.js';

/** One statement, on whichever connection its caller holds. */
export type Query = (text: string, values?: unknown[]) => Promise<pg.QueryResult>;

/** The advisory lock agents starting together take, so that one migrates and the others find it done. */
const MIGRATION_LOCK = 8123001;

/**
 * The PostgreSQL database several agents share (AGENT_DATABASE_URL): a pool of
 * connections, opened once its schema is the newest this agent knows.
 */
export class PostgresDatabase {
  readonly pool: pg.Pool;
  private readonly ready: Promise<void>;

  constructor(
    readonly url: string,
    report: (what: string, err: unknown) => void = () => undefined,
  ) {
    this.pool = new pg.Pool({ connectionString: url, max: 10, idleTimeoutMillis: 30_000, connectionTimeoutMillis: 5_000 });
    this.pool.on('error', (err) => report('a database connection failed', err));
    this.ready = this.inTransactionNow((query) => migrate(query));
    // Whoever uses the database hears of a failure to open it; it is not also an unhandled rejection.
    this.ready.catch(() => undefined);
  }

  /** Resolves once the schema is migrated; rejects when the database cannot be reached. */
  opened(): Promise<void> {
    return this.ready;
  }

  /** Queries on any of the pool's connections, once the schema is migrated. */
  async query(): Promise<Query> {
    await this.ready;
    return (text, values) => this.pool.query(text, values);
  }

  /** Runs `work` in one transaction, once the schema is migrated: all of its writes are kept, or none. */
  async inTransaction<T>(work: (query: Query) => Promise<T>): Promise<T> {
    await this.ready;
    return this.inTransactionNow(work);
  }

  async close(): Promise<void> {
    await this.ready.catch(() => undefined);
    await this.pool.end();
  }

  private async inTransactionNow<T>(work: (query: Query) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const value = await work((text, values) => client.query(text, values));
      await client.query('COMMIT');
      return value;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }
}

/** Applies the migrations the database has not had (migrations/postgres), under a lock held until they commit. */
async function migrate(query: Query): Promise<void> {
  await query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
  await query(SCHEMA_VERSION_TABLE);
  const migrations = migrationsOf('postgres');
  let version = Number((await query('SELECT COALESCE(MAX(version), 0) AS v FROM schema_version')).rows[0]?.v ?? 0);
  const record = (migration: Migration, atMs: number) =>
    query('INSERT INTO schema_version (version, name, applied_at_ms) VALUES ($1, $2, $3)', [migration.version, migration.name, atMs]);
  if (version === 0) {
    version = await versionBeforeMigrations(query);
    for (const migration of migrations.slice(0, version)) await record(migration, 0);
  }
  for (const migration of migrations.slice(version)) {
    await query(migration.sql);
    await record(migration, Date.now());
  }
}

/** The version of a database made before the store kept one (each shape a release wrote); 0 for a new one. */
async function versionBeforeMigrations(query: Query): Promise<number> {
  const { rows } = await query("SELECT to_regclass('exits') IS NOT NULL AS exits, to_regclass('operations') IS NOT NULL AS operations");
  if (!rows[0]?.exits) return 0;
  return rows[0]?.operations ? 2 : 1;
}
