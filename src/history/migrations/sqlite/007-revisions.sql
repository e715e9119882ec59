-- Each bot's revisions (docs/api.md §15): what was deployed (its spec, secrets left out), by whom, when, and how it ended.
CREATE TABLE revisions (
  bot_id TEXT NOT NULL,
  revision INTEGER NOT NULL,
  spec TEXT NOT NULL,
  made_by TEXT NOT NULL,
  made_at_ms INTEGER NOT NULL,
  outcome TEXT NOT NULL,
  reason TEXT,
  ended_at_ms INTEGER,
  PRIMARY KEY (bot_id, revision)
);
