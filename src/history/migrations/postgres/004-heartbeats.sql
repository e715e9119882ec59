-- Each bot's latest heartbeat, as the agents sharing the store took them, in rounds (docs/api.md §13).
CREATE TABLE heartbeats (bot_id TEXT PRIMARY KEY, at_ms BIGINT NOT NULL, ttl_ms BIGINT);
CREATE INDEX heartbeats_by_time ON heartbeats (at_ms);
