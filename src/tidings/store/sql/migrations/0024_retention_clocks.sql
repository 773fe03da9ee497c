-- Retention's four clocks (docs/retention.md): attempt evidence goes before
-- the recipient decision it belongs to, and a job's final counts and cost
-- are kept on the job so they are served after its intents go.
ALTER TABLE intents ADD COLUMN attempts_purged_at timestamptz;
ALTER TABLE jobs
    ADD COLUMN final_counts_by_channel jsonb,
    ADD COLUMN final_cost jsonb,
    ADD COLUMN facts_expire_at timestamptz;
-- Jobs created before this migration take their policy version's clock.
UPDATE jobs j
SET facts_expire_at = j.created_at
    + make_interval(days => (p.document -> 'retention' ->> 'job_facts_days')::int)
FROM policies p
WHERE p.tenant_id = j.tenant_id AND p.version = j.policy_version;
-- A job snapshotted before: its counts by channel are no longer derivable.
UPDATE jobs SET final_counts_by_channel = '{}'::jsonb, final_cost = '{}'::jsonb
WHERE final_counts IS NOT NULL;
-- The purge walks terminal intents whose attempts are still kept.
CREATE INDEX intents_attempts_kept ON intents (tenant_id, policy_version, terminal_at)
    WHERE terminal_at IS NOT NULL AND attempts_purged_at IS NULL;
