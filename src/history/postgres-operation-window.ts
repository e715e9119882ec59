import type { SharedWindow } from '../shared/shared-state.js';
import type { PostgresDatabase } from './postgres-database.js';

/**
 * The rate limiter's window shared by every agent of one database: the
 * lifecycle operations let through, counted in the `operations` table, one
 * agent at a time per key deciding (an advisory lock held until it commits).
 */
export function postgresOperationWindow(database: PostgresDatabase): SharedWindow {
  return (key, limit, windowMs, nowMs) =>
    database.inTransaction(async (query) => {
      await query('SELECT pg_advisory_xact_lock(hashtext($1))', [key]);
      await query('DELETE FROM operations WHERE key = $1 AND at_ms <= $2', [key, nowMs - windowMs]);
      const { rows } = await query('SELECT at_ms FROM operations WHERE key = $1 ORDER BY at_ms LIMIT $2', [key, limit]);
      if (rows.length >= limit) return Number(rows[0].at_ms) + windowMs - nowMs;
      await query('INSERT INTO operations (key, at_ms) VALUES ($1, $2)', [key, nowMs]);
      return undefined;
    });
}
