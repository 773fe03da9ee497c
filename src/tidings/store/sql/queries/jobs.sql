-- name: job_by_key
SELECT * FROM jobs WHERE tenant_id = %(tenant_id)s AND idempotency_key = %(idempotency_key)s;

-- name: job_by_id
SELECT * FROM jobs WHERE tenant_id = %(tenant_id)s AND id = %(id)s;

-- name: insert_job
INSERT INTO jobs (tenant_id, id, idempotency_key, request_hash, event_class, event_reason,
                  purpose, template_name, template_revisions, channels, channel_mode,
                  variables, policy_version, audience_version, audience_size, report_id,
                  report_revision, token_ttl_seconds, expires_at, evidence_expires_at,
                  facts_expire_at, status, created_by, created_at, updated_at)
VALUES (%(tenant_id)s, %(id)s, %(idempotency_key)s, %(request_hash)s, %(event_class)s,
        %(event_reason)s, %(purpose)s, %(template_name)s, %(template_revisions)s,
        %(channels)s, %(channel_mode)s, %(variables)s, %(policy_version)s,
        %(audience_version)s, %(audience_size)s, %(report_id)s, %(report_revision)s,
        %(token_ttl_seconds)s, %(expires_at)s, %(evidence_expires_at)s,
        %(facts_expire_at)s, 'preparing', %(actor)s, %(now)s, %(now)s)
ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
RETURNING *;

-- name: claim_preparing_job
-- A quarantined job (its preparation failed on its own rows or policy,
-- store/isolation.py) is passed over: it would be first every round.
SELECT * FROM jobs WHERE status = 'preparing' AND quarantine_code IS NULL
ORDER BY created_at LIMIT 1
FOR UPDATE SKIP LOCKED;

-- name: recipients_page
SELECT * FROM job_recipients
WHERE tenant_id = %(tenant_id)s AND job_id = %(job_id)s AND seq > %(after)s
ORDER BY seq LIMIT %(limit)s;

-- name: job_progress
UPDATE jobs SET prepared_through = %(seq)s, updated_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND id = %(id)s;

-- name: job_prepared
UPDATE jobs SET status = 'dispatching', prepared_at = %(now)s, updated_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND id = %(id)s AND status = 'preparing';

-- name: job_recipient_states
-- Recipients by a stable cursor over the frozen audience. Each recipient's
-- intents are looked up by its own seq: the lateral subquery (OFFSET 0
-- keeps the planner from flattening it into a join) runs once per row of
-- the page with `job_seq` in its index condition. As a plain join, on
-- tables not analyzed yet, the inner scan used (tenant_id, job_id) alone
-- and filtered every intent of the job for every recipient of the page
-- (issue 38; tests/integration/test_plan_guard.py).
SELECT r.seq, r.recipient_ref, i.channel, i.state, i.code, i.intent_id
FROM job_recipients r
LEFT JOIN LATERAL (
    SELECT i.channel, i.state, i.decision_code AS code, i.id AS intent_id FROM intents i
    WHERE i.tenant_id = r.tenant_id AND i.job_id = r.job_id AND i.job_seq = r.seq
    OFFSET 0) i ON true
WHERE r.tenant_id = %(tenant_id)s AND r.job_id = %(job_id)s AND r.seq > %(after)s
  AND r.seq <= (SELECT coalesce(max(seq), 0) FROM (
        SELECT seq FROM job_recipients
        WHERE tenant_id = %(tenant_id)s AND job_id = %(job_id)s AND seq > %(after)s
        ORDER BY seq LIMIT %(limit)s) page)
ORDER BY r.seq, i.channel;

-- name: contacts_by_refs
SELECT * FROM contacts WHERE tenant_id = %(tenant_id)s AND ref = ANY(%(refs)s);

-- name: blocks_for_page
SELECT 'opt_out' AS kind, channel, destination_hash, source AS reason FROM opt_outs
WHERE tenant_id = %(tenant_id)s AND destination_hash = ANY(%(hashes)s)
UNION ALL
SELECT 'suppression', channel, destination_hash, reason FROM suppressions
WHERE tenant_id = %(tenant_id)s AND destination_hash = ANY(%(hashes)s);

-- name: consents_for_refs
SELECT id, evidence_ref, ref, channel, purpose, captured_at, revoked_at FROM consents
WHERE tenant_id = %(tenant_id)s AND ref = ANY(%(refs)s);

-- name: notify_due_channels
SELECT pg_notify('tidings_due', c) FROM unnest(%(channels)s::text[]) AS c;

-- name: lock_job
-- Pages of one job are prepared one at a time, whoever prepares them.
SELECT * FROM jobs WHERE tenant_id = %(tenant_id)s AND id = %(id)s FOR UPDATE;

-- name: quarantine_job
-- A job whose preparation failed on its own rows or policy: no longer
-- picked (claim_preparing_job), so the jobs behind it are prepared.
UPDATE jobs SET quarantine_code = %(code)s, updated_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND id = %(id)s AND status = 'preparing'
RETURNING id;

-- name: freeze_upload_recipients
-- The same rows the inline path writes: a member named only by ref takes
-- destinations, time zone, locale and preferences from its contact record
-- as this transaction sees it; a member with a destination of its own
-- takes nothing from the contact.
INSERT INTO job_recipients (tenant_id, job_id, seq, recipient_ref, phone_hash, email_hash,
                            phone_country, email_country, timezone, locale, preferences,
                            variables)
SELECT m.tenant_id, %(job_id)s, row_number() OVER (ORDER BY m.seq), m.recipient_ref,
       coalesce(m.phone_hash, c.phone_hash), coalesce(m.email_hash, c.email_hash),
       m.phone_country, NULL,
       coalesce(m.timezone, c.timezone), coalesce(m.locale, c.locale),
       CASE
           WHEN cardinality(m.preferences) > 0 THEN m.preferences
           WHEN jsonb_typeof(c.preferences -> 'channels') = 'array'
               THEN ARRAY(SELECT jsonb_array_elements_text(c.preferences -> 'channels'))
           ELSE '{}'
       END,
       m.variables
FROM audience_upload_members m
LEFT JOIN contacts c
       ON c.tenant_id = m.tenant_id AND c.ref = m.recipient_ref
      AND m.phone_hash IS NULL AND m.email_hash IS NULL
WHERE m.tenant_id = %(tenant_id)s AND m.upload_id = %(id)s;

-- name: copy_job_recipients
COPY job_recipients (tenant_id, job_id, seq, recipient_ref, phone_hash, email_hash, phone_country, email_country, timezone, locale, preferences, variables) FROM STDIN
