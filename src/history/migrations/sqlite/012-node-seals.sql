-- Each node's row carries its seal (docs/api.md §17): an HMAC under a key derived from the fleet key, so that a
-- row written by anyone who holds only the database's credentials is not taken for a node of the fleet.
ALTER TABLE nodes ADD COLUMN seal TEXT;
