import type { Beat, SharedBeats } from '../shared/shared-state.js';
import type { PostgresDatabase } from './postgres-database.js';

/** Beats older than this are dropped as a round writes: no bot's heartbeat holds longer. */
const BEATS_KEPT_MS = 24 * 3_600_000;

/** The heartbeats every agent of one database took, each round's in one statement (docs/api.md §13). */
export function postgresBeats(database: PostgresDatabase): SharedBeats {
  return {
    // One writer at a time (a lock held until it commits): rounds become visible in order, so a reader that
    // asks for what came after the newest round it saw never skips a write that committed later.
    shareBeats: (beats: readonly Beat[]) =>
      database.inTransaction(async (query) => {
        await query('SELECT pg_advisory_xact_lock(hashtext($1))', ['heartbeats']);
        await query(
        `INSERT INTO heartbeats (bot_id, at_ms, ttl_ms, round)
           SELECT bot_id, at_ms, ttl_ms, nextval('heartbeat_rounds') FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS beat (bot_id, at_ms, ttl_ms)
         ON CONFLICT (bot_id) DO UPDATE SET at_ms = EXCLUDED.at_ms, ttl_ms = EXCLUDED.ttl_ms, round = EXCLUDED.round
           WHERE heartbeats.at_ms < EXCLUDED.at_ms`,
          [beats.map((beat) => beat.botId), beats.map((beat) => beat.atMs), beats.map((beat) => beat.ttlMs)],
        );
        await query('DELETE FROM heartbeats WHERE at_ms < $1', [Date.now() - BEATS_KEPT_MS]);
      }),
    async beatsAfter(round: number): Promise<{ beats: Beat[]; round: number }> {
      const { rows } = await (await database.query())('SELECT bot_id, at_ms, ttl_ms, round FROM heartbeats WHERE round > $1', [round]);
      const beats = rows.map((row) => ({ botId: row.bot_id as string, atMs: Number(row.at_ms), ttlMs: row.ttl_ms === null ? null : Number(row.ttl_ms) }));
      return { beats, round: rows.reduce((newest, row) => Math.max(newest, Number(row.round)), round) };
    },
  };
}
