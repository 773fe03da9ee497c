-- Keys may expire, and the console signs in with a session instead of
-- keeping the key itself in a browser cookie.
ALTER TABLE api_keys
    ADD COLUMN expires_at timestamptz
        CHECK (expires_at >= '1970-01-01 00:00:00+00' AND expires_at < '9000-01-01 00:00:00+00');

-- Revoked and expired keys are looked up too, so a client is told why its
-- key stopped working (KEY_REVOKED, KEY_EXPIRED) instead of "unknown".
DROP INDEX api_keys_active;
CREATE INDEX api_keys_by_hash ON api_keys (key_hash);

-- A console session: only a sha256 of its random id is stored, so a read
-- of this table cannot sign anyone in. Scopes are read from the key at
-- each request; revoking the key deletes its sessions (and the lookup
-- ignores sessions of a revoked or expired key anyway).
CREATE TABLE console_sessions (
    tenant_id    text        NOT NULL,
    session_hash text        NOT NULL,
    key_id       text        NOT NULL,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL
                     CHECK (expires_at >= '1970-01-01 00:00:00+00'
                            AND expires_at < '9000-01-01 00:00:00+00'),
    PRIMARY KEY (tenant_id, session_hash),
    FOREIGN KEY (tenant_id, key_id) REFERENCES api_keys (tenant_id, key_id) ON DELETE CASCADE
);
-- A cookie names no tenant: looked up by hash across tenants, as API keys.
CREATE INDEX console_sessions_by_hash ON console_sessions (session_hash);
CREATE INDEX console_sessions_of_key ON console_sessions (tenant_id, key_id);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);
