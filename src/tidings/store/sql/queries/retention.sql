-- name: retention_groups
-- Terminal intents grouped by the policy version whose retention applies.
SELECT tenant_id, policy_version, min(terminal_at) AS oldest
FROM intents
WHERE terminal_at IS NOT NULL AND policy_version IS NOT NULL
GROUP BY tenant_id, policy_version;

-- name: snapshot_job_counts
-- Aggregate job facts outlive recipient-level evidence: keep the final
-- counts on the job before its intents go.
UPDATE jobs j SET final_counts = c.counts, updated_at = %(now)s
FROM (
    SELECT tenant_id, job_id, jsonb_object_agg(state, n) AS counts
    FROM (SELECT tenant_id, job_id, state, count(*) AS n FROM intents
          WHERE tenant_id = %(tenant_id)s AND job_id IS NOT NULL
          GROUP BY tenant_id, job_id, state) s
    GROUP BY tenant_id, job_id
) c
WHERE j.tenant_id = c.tenant_id AND j.id = c.job_id AND j.final_counts IS NULL
  AND NOT EXISTS (SELECT 1 FROM intents i WHERE i.tenant_id = j.tenant_id AND i.job_id = j.id
                  AND i.terminal_at IS NULL);

-- name: purge_intents
-- Recipient-level evidence past its retention: the intent with its
-- attempts, transitions, observations and events, in one statement.
WITH doomed AS (
    SELECT tenant_id, id FROM intents
    WHERE tenant_id = %(tenant_id)s AND policy_version = %(policy_version)s
      AND terminal_at < %(before)s
    LIMIT %(limit)s
), gone_transitions AS (
    DELETE FROM transitions t USING doomed d
    WHERE t.tenant_id = d.tenant_id AND t.intent_id = d.id
), gone_attempts AS (
    DELETE FROM attempts a USING doomed d
    WHERE a.tenant_id = d.tenant_id AND a.intent_id = d.id
), gone_observations AS (
    DELETE FROM observations o USING doomed d
    WHERE o.tenant_id = d.tenant_id AND o.intent_id = d.id
), gone_events AS (
    DELETE FROM events e USING doomed d
    WHERE e.tenant_id = d.tenant_id AND e.intent_id = d.id
)
DELETE FROM intents i USING doomed d
WHERE i.tenant_id = d.tenant_id AND i.id = d.id;

-- name: purge_observations
DELETE FROM observations WHERE received_at < %(before)s AND intent_id IS NULL;

-- name: purge_expired_uploads
-- An uploaded audience past its expiry, used or not, goes with its members
-- (and their encrypted destinations) by the cascade.
DELETE FROM audience_uploads WHERE expires_at < %(now)s;

-- name: purge_job_recipients
DELETE FROM job_recipients r USING jobs j
WHERE r.tenant_id = j.tenant_id AND r.job_id = j.id AND j.evidence_expires_at < %(now)s
  AND j.final_counts IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM intents i WHERE i.tenant_id = j.tenant_id AND i.job_id = j.id);

-- name: purge_orphan_destinations
-- A destination nothing refers to any more is deleted with its ciphertext.
DELETE FROM destinations d
WHERE NOT EXISTS (SELECT 1 FROM intents i WHERE i.tenant_id = d.tenant_id
                  AND i.destination_hash = d.destination_hash)
  AND NOT EXISTS (SELECT 1 FROM contacts c WHERE c.tenant_id = d.tenant_id
                  AND d.destination_hash IN (c.phone_hash, c.email_hash))
  AND NOT EXISTS (SELECT 1 FROM job_recipients r WHERE r.tenant_id = d.tenant_id
                  AND d.destination_hash IN (r.phone_hash, r.email_hash));
