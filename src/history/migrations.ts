import { readdirSync, readFileSync } from 'node:fs';

/** The SQL dialects a history store speaks. */
export type Dialect = 'sqlite' | 'postgres';

/** One step of a store's schema: `migrations/<dialect>/NNN-name.sql`. */
export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

/**
 * Which migrations a store has had, one row each. Both dialects read this
 * statement: INTEGER and BIGINT are both 64-bit where they are used.
 */
export const SCHEMA_VERSION_TABLE =
  'CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at_ms BIGINT NOT NULL)';

/** The files beside this module (copied beside the build's by `npm run build`). */
const FOLDER = new URL('./migrations/', import.meta.url);

/**
 * The dialect's migrations in order. Their numbers run from 1 without a gap:
 * a store at version N has had exactly the first N. Migrations only add
 * (tables, columns with defaults, indexes), so that an agent of the version
 * before still works on a store that a newer one has migrated, as during a
 * rolling upgrade.
 */
export function migrationsOf(dialect: Dialect): Migration[] {
  const folder = new URL(`${dialect}/`, FOLDER);
  const migrations = readdirSync(folder)
    .filter((file) => file.endsWith('.sql'))
    .sort()
    .map((file): Migration => {
      const named = /^(\d{3})-([a-z0-9-]+)\.sql$/.exec(file);
      if (!named) throw new Error(`migration ${dialect}/${file} is not named NNN-name.sql`);
      return { version: Number(named[1]), name: named[2] ?? '', sql: readFileSync(new URL(file, folder), 'utf8') };
    });
  migrations.forEach((migration, at) => {
    if (migration.version !== at + 1) throw new Error(`migration ${dialect} ${migration.version} should be ${at + 1}: the numbers have a gap`);
  });
  return migrations;
}

/**
 * What a dialect's store does for the migration runner, inside the one transaction that holds its lock: the same
 * steps in both dialects, each in its own SQL (and SQLite's synchronously, PostgreSQL's asynchronously).
 */
export interface MigrationAdapter<Answer> {
  readonly dialect: Dialect;
  /** Makes the version table when it is not there, and answers the newest version it records (0: none). */
  recordedVersion(): Answer;
  /** The version of a store made before the version table, read from the shape of what it holds (0: a new store). */
  versionBeforeMigrations(): Answer;
  /** Applies one migration (its SQL, and whatever the dialect moves with it). */
  apply(migration: Migration): Answer;
  /** Records that the store has had the migration. */
  record(migration: Migration, atMs: number): Answer;
}

type Step = { readonly step: 'recordedVersion' | 'versionBeforeMigrations' } | { readonly step: 'apply' | 'record'; readonly migration: Migration; readonly atMs?: number };

/**
 * The migration procedure, written once: a store at version N has had the first N; one made before the version
 * table has its version read from its shape, and the migrations it had are recorded as applied at 0; the rest are
 * applied in order, each recorded as it is.
 */
function* migrationSteps(dialect: Dialect): Generator<Step, void, unknown> {
  const migrations = migrationsOf(dialect);
  let version = Number(yield { step: 'recordedVersion' });
  if (version === 0) {
    version = Number(yield { step: 'versionBeforeMigrations' });
    for (const migration of migrations.slice(0, version)) yield { step: 'record', migration, atMs: 0 };
  }
  for (const migration of migrations.slice(version)) {
    yield { step: 'apply', migration };
    yield { step: 'record', migration, atMs: Date.now() };
  }
}

function ask<Answer>(adapter: MigrationAdapter<Answer>, step: Step): Answer {
  if (step.step === 'apply') return adapter.apply(step.migration);
  if (step.step === 'record') return adapter.record(step.migration, step.atMs ?? 0);
  return adapter[step.step]();
}

/** Brings a store whose statements answer at once (SQLite's) to the newest schema. */
export function migrate(adapter: MigrationAdapter<number | void>): void {
  const steps = migrationSteps(adapter.dialect);
  for (let next = steps.next(); !next.done; next = steps.next(ask(adapter, next.value)));
}

/** Brings a store whose statements answer later (PostgreSQL's) to the newest schema. */
export async function migrateAsync(adapter: MigrationAdapter<Promise<number | void>>): Promise<void> {
  const steps = migrationSteps(adapter.dialect);
  for (let next = steps.next(); !next.done; next = steps.next(await ask(adapter, next.value)));
}
