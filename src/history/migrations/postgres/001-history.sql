-- The history several agents share: exit records, events with the one counter their
-- cursors come from, crash loops, webhook deliveries and forgotten bots.
CREATE TABLE exits (
  seq BIGSERIAL PRIMARY KEY,
  bot_id TEXT NOT NULL,
  at_ms BIGINT NOT NULL,
  requested BOOLEAN NOT NULL,
  record TEXT NOT NULL,
  run_key TEXT UNIQUE,
  logs TEXT NOT NULL DEFAULT ''
);
CREATE INDEX exits_by_bot ON exits (bot_id, seq);
CREATE TABLE events (
  seq BIGINT PRIMARY KEY,
  bot_id TEXT NOT NULL,
  type TEXT NOT NULL,
  at_ms BIGINT NOT NULL,
  data TEXT NOT NULL,
  run_key TEXT UNIQUE
);
CREATE INDEX events_by_bot ON events (bot_id, seq);
CREATE INDEX events_by_time ON events (at_ms);
CREATE TABLE event_counter (one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one), n BIGINT NOT NULL);
INSERT INTO event_counter (one, n) VALUES (TRUE, 0);
CREATE TABLE crash_loops (bot_id TEXT PRIMARY KEY, since_ms BIGINT NOT NULL);
CREATE TABLE deliveries (
  seq BIGINT PRIMARY KEY,
  bot_id TEXT NOT NULL,
  type TEXT NOT NULL,
  data TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_at_ms BIGINT NOT NULL,
  first_at_ms BIGINT NOT NULL,
  claimed_until_ms BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX deliveries_by_bot ON deliveries (bot_id, seq);
CREATE TABLE forgotten (bot_id TEXT PRIMARY KEY, at_ms BIGINT NOT NULL);
