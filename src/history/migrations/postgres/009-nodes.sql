-- The fleet's nodes (docs/api.md §17): each agent renews its own row; one not renewed for 15 s is away.
CREATE TABLE nodes (name TEXT PRIMARY KEY, url TEXT, alive_ms BIGINT NOT NULL);
-- Which node's engine holds each bot, as that node's agent last said, and whether it ran.
CREATE TABLE node_bots (bot_id TEXT PRIMARY KEY, node TEXT NOT NULL, running BOOLEAN NOT NULL, seen_ms BIGINT NOT NULL);
CREATE INDEX node_bots_by_node ON node_bots (node);
