-- Issue #38: every read an operator makes costs its page, on tables never
-- analyzed (tests/integration/test_plan_guard.py plans each named query).
-- The console's oldest open intents of a tenant, in the order it lists
-- them: read from the front of this index, never from the tenant's history.
CREATE INDEX intents_open_oldest ON intents (tenant_id, created_at, id)
    WHERE state IN ('pending', 'sending', 'accepted', 'resend_due', 'reconciling');
-- Deadlines passed with no call made (lanes_expired_unsent): counted from
-- these rows alone, not from every finished intent.
CREATE INDEX intents_expired_unsent ON intents (tenant_id, event_class)
    WHERE state = 'expired' AND attempt_count = 0;
-- Retention's groups (retention_groups): each (tenant, policy version)
-- found by one probe, its oldest finished intent the first of its range.
CREATE INDEX intents_retention_groups ON intents (tenant_id, policy_version, terminal_at)
    WHERE terminal_at IS NOT NULL AND policy_version IS NOT NULL;
