-- A record's logs in a column of their own (the store moves and bounds the old ones
-- after this file runs), and when each removed bot was forgotten.
ALTER TABLE exits ADD COLUMN logs TEXT NOT NULL DEFAULT '';
CREATE TABLE forgotten (
  bot_id TEXT PRIMARY KEY,
  at_ms INTEGER NOT NULL
);
