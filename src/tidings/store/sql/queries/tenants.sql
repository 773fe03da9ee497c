-- name: tenant_exists
-- An inbound message acts for a tenant that already exists; it never creates one.
SELECT EXISTS (SELECT 1 FROM tenants WHERE tenant_id = %(tenant_id)s) AS found;

-- name: tenant_ids
-- Every tenant: a deployment-wide alert (a provider account's canary) is
-- told to each, since every tenant sends through the deployment's accounts.
SELECT tenant_id FROM tenants ORDER BY tenant_id;
