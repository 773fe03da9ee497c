-- Issue #36. The claim takes due intents by lane (sql/fragments/due_lanes.sql):
-- single intents first, each tenant's oldest due; then each sending job's
-- oldest due intents. Each lane walks an index of its own claimable rows, so a
-- job's backlog is never read to find a single intent, nor one job's rows
-- to find another's.
CREATE INDEX intents_due_single ON intents (channel, tenant_id, next_due_at, id)
    WHERE state IN ('pending', 'resend_due') AND job_id IS NULL;
CREATE INDEX intents_due_job ON intents (tenant_id, job_id, channel, next_due_at, id)
    WHERE state IN ('pending', 'resend_due') AND job_id IS NOT NULL;
-- The jobs sending now: the claim's bulk lanes.
CREATE INDEX jobs_sending ON jobs (tenant_id, id)
    WHERE status IN ('preparing', 'dispatching');

-- A provider account's rate counters are the deployment's, kept under the
-- empty tenant id (domain/limits.py, LimitKey.counted_for): no tenant may
-- have it.
ALTER TABLE tenants ADD CONSTRAINT tenants_id_not_empty CHECK (tenant_id <> '');
