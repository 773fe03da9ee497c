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

-- name: job_counts
-- The projection is computed from the intents themselves: every count is
-- derivable from rows, so it can never disagree with them.
SELECT state, channel, count(*) AS n, max(updated_at) AS updated_at,
       coalesce(sum(attempt_count), 0) AS attempts
FROM intents WHERE tenant_id = %(tenant_id)s AND job_id = %(job_id)s
GROUP BY state, channel;

-- name: job_segments
SELECT coalesce(sum(a.segments), 0) AS segments, count(a.*) AS attempts,
       count(a.*) FILTER (WHERE a.accepted_at IS NOT NULL) AS reached_provider
FROM attempts a JOIN intents i ON i.tenant_id = a.tenant_id AND i.id = a.intent_id
WHERE i.tenant_id = %(tenant_id)s AND i.job_id = %(job_id)s;

-- name: job_recipient_states
-- Recipients by a stable cursor over the frozen audience.
SELECT r.seq, r.recipient_ref, i.channel, i.state, i.decision_code AS code, i.id AS intent_id
FROM job_recipients r
LEFT JOIN intents i ON i.tenant_id = r.tenant_id AND i.job_id = r.job_id AND i.job_seq = r.seq
WHERE r.tenant_id = %(tenant_id)s AND r.job_id = %(job_id)s AND r.seq > %(after)s
  AND r.seq <= (SELECT coalesce(max(seq), 0) FROM (
        SELECT seq FROM job_recipients
        WHERE tenant_id = %(tenant_id)s AND job_id = %(job_id)s AND seq > %(after)s
        ORDER BY seq LIMIT %(limit)s) page)
ORDER BY r.seq, i.channel;

-- name: report_by_id
SELECT * FROM reports WHERE tenant_id = %(tenant_id)s AND id = %(id)s AND revision = %(revision)s;

-- name: insert_report
INSERT INTO reports (tenant_id, id, revision, filename, content_type, location, size_bytes,
                     created_at)
VALUES (%(tenant_id)s, %(id)s, %(revision)s, %(filename)s, %(content_type)s, %(location)s,
        %(size_bytes)s, %(now)s)
ON CONFLICT (tenant_id, id, revision) DO NOTHING;

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

-- name: move_staged_intents
-- Staged rows become intents, each with its creation audit, in one
-- statement; a page replayed after a crash inserts nothing twice.
WITH created AS (
    INSERT INTO intents SELECT * FROM staged_intents
    ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
    RETURNING tenant_id, id, idempotency_key, version, state, policy_version, decision_code,
              created_at, created_by, template_name, template_revision, job_id
), audit AS (
    -- An exclusion decided at preparation carries its decision's inputs.
    INSERT INTO transitions (tenant_id, intent_id, version, from_state, to_state, event, actor,
                             input, policy_version, decision_code, at)
    SELECT c.tenant_id, c.id, c.version, NULL, c.state,
           CASE WHEN c.state = 'pending' THEN 'create' ELSE 'create_excluded' END,
           c.created_by,
           jsonb_strip_nulls(jsonb_build_object(
               'job_id', c.job_id, 'template', c.template_name,
               'template_revision', c.template_revision, 'decision_inputs', s.inputs)),
           c.policy_version, c.decision_code, c.created_at
    FROM created c
    LEFT JOIN jsonb_to_recordset(%(inputs)s::jsonb) AS s (idempotency_key text, inputs jsonb)
           ON s.idempotency_key = c.idempotency_key
), announced AS (
    INSERT INTO events (tenant_id, type, intent_id, job_id, payload, created_at)
    SELECT tenant_id, 'intent.' || state, id, job_id,
           jsonb_build_object('intent_id', id, 'state', state, 'code', decision_code),
           created_at
    FROM created WHERE state <> 'pending'
)
SELECT count(*) AS created FROM created;

-- name: notify_due_channels
SELECT pg_notify('tidings_due', c) FROM unnest(%(channels)s::text[]) AS c;

-- name: lock_job
-- Pages of one job are prepared one at a time, whoever prepares them.
SELECT * FROM jobs WHERE tenant_id = %(tenant_id)s AND id = %(id)s FOR UPDATE;
