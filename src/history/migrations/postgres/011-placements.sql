-- Where the fleet places each bot a move took (docs/fleet.md): the one node whose copy may run. A move changes it
-- only from the placement it read (its generation one more), so two writers never both win; `start_pending` is
-- a moved bot that ran, which its new node starts (once, whoever finds it so first).
CREATE TABLE placements (bot_id TEXT PRIMARY KEY, node TEXT NOT NULL, generation BIGINT NOT NULL, start_pending BOOLEAN NOT NULL, placed_ms BIGINT NOT NULL);
