-- Console sessions ended before their expiry (by their nonce, until that expiry): every agent sharing the
-- store refuses them, not only the one that ended them.
CREATE TABLE ended_sessions (nonce TEXT PRIMARY KEY, until_ms BIGINT NOT NULL);
