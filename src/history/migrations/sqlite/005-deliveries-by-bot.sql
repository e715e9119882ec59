-- The queue asks for each bot's oldest pending delivery: without this index every
-- claim scanned the whole queue once per row, while a receiver that is down lets it grow.
CREATE INDEX deliveries_by_bot ON deliveries (bot_id, seq);
