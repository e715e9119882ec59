-- The agent's node (docs/api.md §17): one agent over SQLite is a fleet of one, kept as PostgreSQL keeps many.
CREATE TABLE nodes (
  name TEXT PRIMARY KEY,
  url TEXT,
  alive_ms INTEGER NOT NULL
);
-- Which node's engine holds each bot, as that node's agent last said, and whether it ran.
CREATE TABLE node_bots (
  bot_id TEXT PRIMARY KEY,
  node TEXT NOT NULL,
  running INTEGER NOT NULL,
  seen_ms INTEGER NOT NULL
);
CREATE INDEX node_bots_by_node ON node_bots (node);
