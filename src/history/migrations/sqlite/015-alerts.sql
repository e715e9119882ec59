-- Alert rules (docs/api.md §22): a line that matches, CPU or memory above a threshold for a window, or no line for
-- a while, of one bot (bot_id) or of every bot (NULL). `alerts_fired` holds when a rule last fired for a bot: an
-- agent fires only by moving it past the rule's cooldown, so two agents that see the same bot fire once.
CREATE TABLE alert_rules (id TEXT PRIMARY KEY, bot_id TEXT, spec TEXT NOT NULL, created_ms BIGINT NOT NULL);
CREATE INDEX alert_rules_by_bot ON alert_rules (bot_id);
CREATE TABLE alerts_fired (rule_id TEXT NOT NULL, bot_id TEXT NOT NULL, fired_ms BIGINT NOT NULL, PRIMARY KEY (rule_id, bot_id));
