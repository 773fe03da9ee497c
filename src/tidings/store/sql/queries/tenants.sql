-- name: tenant_exists
-- An inbound message acts for a tenant that already exists; it never creates one.
SELECT EXISTS (SELECT 1 FROM tenants WHERE tenant_id = %(tenant_id)s) AS found;
