-- name: insert_api_key
INSERT INTO api_keys (tenant_id, key_id, key_hash, scopes, name, created_at)
VALUES (%(tenant_id)s, %(key_id)s, %(key_hash)s, %(scopes)s, %(name)s,
        coalesce(%(now)s::timestamptz, now()));

-- name: api_keys_by_hash
-- Across tenants on purpose: the key is the only thing a request names.
SELECT tenant_id, key_id, key_hash, scopes FROM api_keys
WHERE key_hash = %(key_hash)s AND revoked_at IS NULL;

-- name: revoke_api_key
UPDATE api_keys SET revoked_at = coalesce(%(now)s::timestamptz, now())
WHERE tenant_id = %(tenant_id)s AND key_id = %(key_id)s AND revoked_at IS NULL;

-- name: api_keys_of
SELECT key_id, scopes, name, created_at, revoked_at FROM api_keys
WHERE tenant_id = %(tenant_id)s ORDER BY created_at, key_id;
