-- Events are pruned by age; nothing reads the key-value table any more.
CREATE INDEX events_by_time ON events (at_ms);
DROP TABLE meta;
