-- API keys, one set per tenant. Only a sha256 of each key is stored: the
-- key is 256 bits of randomness, so a plain hash is enough (no slow KDF
-- needed) and a stolen table reveals no usable key.
CREATE TABLE api_keys (
    tenant_id   text        NOT NULL REFERENCES tenants (tenant_id),
    key_id      text        NOT NULL,
    key_hash    text        NOT NULL,
    scopes      text[]      NOT NULL
                    CHECK (cardinality(scopes) > 0
                           AND scopes <@ ARRAY['send', 'read', 'admin', 'webhook']::text[]),
    name        text        NOT NULL,
    created_at  timestamptz NOT NULL,
    revoked_at  timestamptz,
    PRIMARY KEY (tenant_id, key_id),
    UNIQUE (tenant_id, key_hash)
);

-- A request names no tenant, only its key: authentication looks the key up
-- by hash across tenants. Not unique (keys must start with tenant_id);
-- 256 random bits make a collision moot. Revoked keys are never looked up.
CREATE INDEX api_keys_active ON api_keys (key_hash) WHERE revoked_at IS NULL;
