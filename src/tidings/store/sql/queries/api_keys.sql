-- name: insert_api_key
INSERT INTO api_keys (tenant_id, key_id, key_hash, scopes, name, created_at, expires_at,
                      parent_key_id)
VALUES (%(tenant_id)s, %(key_id)s, %(key_hash)s, %(scopes)s, %(name)s,
        coalesce(%(now)s::timestamptz, now()), %(expires_at)s, %(parent_key_id)s);

-- name: lock_parent_api_key
-- The key minting another, held against revocation until the new key
-- commits: a revocation waits for the mint, then finds the new key.
SELECT expires_at, revoked_at FROM api_keys
WHERE tenant_id = %(tenant_id)s AND key_id = %(key_id)s
FOR SHARE;

-- name: api_keys_by_hash
-- Across tenants on purpose: the key is the only thing a request names.
-- Revoked and expired rows come back too; the caller says which it was.
-- Two hashes: the keyed one, and the plain sha256 keys were stored as
-- before (store/api_keys.py rehashes those on use).
SELECT tenant_id, key_id, key_hash, scopes, revoked_at, expires_at FROM api_keys
WHERE key_hash = ANY(%(key_hashes)s);

-- name: rehash_api_key
UPDATE api_keys SET key_hash = %(key_hash)s
WHERE tenant_id = %(tenant_id)s AND key_id = %(key_id)s AND key_hash = %(old_hash)s;

-- name: revoke_api_key
UPDATE api_keys SET revoked_at = coalesce(%(now)s::timestamptz, now())
WHERE tenant_id = %(tenant_id)s AND key_id = %(key_id)s AND revoked_at IS NULL;

-- name: revoke_api_key_descendants
-- Every live key below this one (through revoked ones too). A key minted
-- while this ran is not in this statement's snapshot: the caller repeats
-- it until it revokes nothing (store/api_keys.py, `revoke`).
WITH RECURSIVE below (key_id) AS (
    SELECT key_id FROM api_keys
    WHERE tenant_id = %(tenant_id)s AND parent_key_id = %(key_id)s
    UNION
    SELECT child.key_id FROM api_keys child JOIN below ON child.parent_key_id = below.key_id
    WHERE child.tenant_id = %(tenant_id)s
)
UPDATE api_keys SET revoked_at = coalesce(%(now)s::timestamptz, now())
WHERE tenant_id = %(tenant_id)s AND revoked_at IS NULL
  AND key_id IN (SELECT key_id FROM below);

-- name: api_key_descendants
WITH RECURSIVE below (key_id) AS (
    SELECT key_id FROM api_keys
    WHERE tenant_id = %(tenant_id)s AND parent_key_id = %(key_id)s
    UNION
    SELECT child.key_id FROM api_keys child JOIN below ON child.parent_key_id = below.key_id
    WHERE child.tenant_id = %(tenant_id)s
)
SELECT key_id FROM below ORDER BY key_id;

-- name: delete_console_sessions_of_keys
DELETE FROM console_sessions WHERE tenant_id = %(tenant_id)s AND key_id = ANY(%(key_ids)s);

-- name: api_keys_of
SELECT tenant_id, key_id, parent_key_id, scopes, name, created_at, expires_at, revoked_at
FROM api_keys
WHERE tenant_id = %(tenant_id)s ORDER BY created_at, key_id;

-- name: api_keys_all
-- Every tenant's keys: for the operator's CLI only, never for a request.
SELECT tenant_id, key_id, parent_key_id, scopes, name, created_at, expires_at, revoked_at
FROM api_keys
ORDER BY tenant_id, created_at, key_id;

-- name: api_key_tenants
-- Which tenants hold a key by this id (the operator's CLI names only the id).
SELECT tenant_id FROM api_keys WHERE key_id = %(key_id)s ORDER BY tenant_id;

-- name: api_key_of
SELECT tenant_id, key_id, parent_key_id, scopes, name, created_at, expires_at, revoked_at
FROM api_keys
WHERE tenant_id = %(tenant_id)s AND key_id = %(key_id)s;

-- name: count_usable_api_keys
SELECT count(*) AS n FROM api_keys
WHERE tenant_id = %(tenant_id)s AND revoked_at IS NULL
  AND (expires_at IS NULL OR expires_at > %(now)s);
