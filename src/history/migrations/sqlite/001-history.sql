-- The first history (exit records with their logs inside the record's JSON, events,
-- crash loops, webhook deliveries) and the key-value table of its time, since dropped.
CREATE TABLE exits (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  bot_id TEXT NOT NULL,
  at_ms INTEGER NOT NULL,
  requested INTEGER NOT NULL,
  record TEXT NOT NULL,
  run_key TEXT UNIQUE
);
CREATE INDEX exits_by_bot ON exits (bot_id, seq);
CREATE TABLE events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  bot_id TEXT NOT NULL,
  type TEXT NOT NULL,
  at_ms INTEGER NOT NULL,
  data TEXT NOT NULL,
  run_key TEXT UNIQUE
);
CREATE INDEX events_by_bot ON events (bot_id, seq);
CREATE TABLE crash_loops (
  bot_id TEXT PRIMARY KEY,
  since_ms INTEGER NOT NULL
);
CREATE TABLE deliveries (
  seq INTEGER PRIMARY KEY,
  bot_id TEXT NOT NULL,
  type TEXT NOT NULL,
  data TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_at_ms INTEGER NOT NULL,
  first_at_ms INTEGER NOT NULL
);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
