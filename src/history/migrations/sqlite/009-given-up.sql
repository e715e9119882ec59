-- Bots the agent gave up on under their restart policy (docs/api.md §13): stopped, until started again through it
-- (ended_ms: when; the crashes before then no longer count against the policy).
CREATE TABLE given_up (
  bot_id TEXT PRIMARY KEY,
  since_ms INTEGER NOT NULL,
  ended_ms INTEGER
);
