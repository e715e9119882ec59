-- A bot's own chats (docs/api.md §16), beside those of AGENT_NOTIFY_*: their JSON, secrets included (the data
-- folder is the agent's alone), and when they were set, so a removal forgets only those set before it.
CREATE TABLE bot_chats (
  bot_id TEXT PRIMARY KEY,
  chats TEXT NOT NULL,
  set_ms INTEGER NOT NULL
);
