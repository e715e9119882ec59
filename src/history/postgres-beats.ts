import type { Beat, SharedBeats } from '../shared/shared-state.js';
import type { PostgresDatabase } from './postgres-database.js';

/** Beats older than this are dropped as a round writes: no bot's heartbeat holds longer. */
const BEATS_KEPT_MS = 24 * 3_600_000;

/** The heartbeats every agent of one database took, each round's in one statement (docs/api.md §13). */
export function postgresBeats(database: PostgresDatabase): SharedBeats {
  return {
    async shareBeats(beats: readonly Beat[]): Promise<void> {
      const query = await database.query();
      await query(
        `INSERT INTO heartbeats (bot_id, at_ms, ttl_ms)
           SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[])
         ON CONFLICT (bot_id) DO UPDATE SET at_ms = GREATEST(heartbeats.at_ms, EXCLUDED.at_ms), ttl_ms = EXCLUDED.ttl_ms`,
        [beats.map((beat) => beat.botId), beats.map((beat) => beat.atMs), beats.map((beat) => beat.ttlMs)],
      );
      await query('DELETE FROM heartbeats WHERE at_ms < $1', [Date.now() - BEATS_KEPT_MS]);
    },
    async beatsSince(sinceMs: number): Promise<Beat[]> {
      const { rows } = await (await database.query())('SELECT bot_id, at_ms, ttl_ms FROM heartbeats WHERE at_ms > $1', [sinceMs]);
      return rows.map((row) => ({ botId: row.bot_id as string, atMs: Number(row.at_ms), ttlMs: row.ttl_ms === null ? null : Number(row.ttl_ms) }));
    },
  };
}
