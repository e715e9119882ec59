-- Each bot's latest heartbeat, as the agents sharing the store took them, in rounds (docs/api.md §13). `round`
-- grows with every write, so that a reader asks for what is newer than what it read last, whatever the clocks.
CREATE SEQUENCE heartbeat_rounds;
CREATE TABLE heartbeats (bot_id TEXT PRIMARY KEY, at_ms BIGINT NOT NULL, ttl_ms BIGINT, round BIGINT NOT NULL);
CREATE INDEX heartbeats_by_round ON heartbeats (round);
