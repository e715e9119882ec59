-- A delivery claimed by one sender is left to it until the claim lapses.
ALTER TABLE deliveries ADD COLUMN claimed_until_ms INTEGER NOT NULL DEFAULT 0;
