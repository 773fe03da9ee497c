-- name: insert_policy
INSERT INTO policies (tenant_id, version, name, document, published_at, published_by)
VALUES (%(tenant_id)s, %(version)s, %(name)s, %(document)s, %(now)s, %(actor)s)
ON CONFLICT (tenant_id, version) DO NOTHING
RETURNING version;

-- name: policy_by_version
SELECT * FROM policies WHERE tenant_id = %(tenant_id)s AND version = %(version)s;

-- name: current_policy
-- A quarantined version (past the limits, 0027) is never current.
SELECT * FROM policies WHERE tenant_id = %(tenant_id)s AND quarantine_code IS NULL
ORDER BY published_at DESC, version DESC LIMIT 1;

-- name: policies_list
SELECT version, name, published_at, published_by FROM policies
WHERE tenant_id = %(tenant_id)s ORDER BY published_at DESC;
