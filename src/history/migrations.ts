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
