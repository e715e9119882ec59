-- Lifecycle operations let through, so that rate limits hold across agents.
CREATE TABLE operations (key TEXT NOT NULL, at_ms BIGINT NOT NULL);
CREATE INDEX operations_by_key ON operations (key, at_ms);
