-- name: claim_due_ids
-- The claim's batch by id alone (dispatch/quarantine.py): what claim_due
-- takes, without any column a worker might fail to decode. Only read
-- when the batch could not be claimed whole.
WITH RECURSIVE /* include: due_lanes */
SELECT p.tenant_id, p.id FROM picked p
ORDER BY p.place;

-- name: claim_one
-- claim_due for one intent: the same columns (a test compares the two
-- select lists), so a batch claimed row by row behaves as one claimed whole.
SELECT i.*, d.ciphertext AS destination_ciphertext,
       EXISTS (SELECT 1 FROM opt_outs o
               WHERE o.tenant_id = i.tenant_id AND o.channel = i.channel
                 AND o.destination_hash = i.destination_hash) AS fact_opted_out,
       (SELECT s.reason FROM suppressions s
        WHERE s.tenant_id = i.tenant_id AND s.channel = i.channel
          AND s.destination_hash = i.destination_hash) AS fact_suppressed,
       (SELECT c.timezone FROM contacts c
        WHERE c.tenant_id = i.tenant_id AND c.ref = i.recipient_ref) AS fact_contact_timezone,
       (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', k.id, 'evidence_ref', k.evidence_ref,
                   'purpose', k.purpose, 'captured_at', k.captured_at,
                   'revoked_at', k.revoked_at)), '[]'::jsonb)
        FROM consents k
        WHERE k.tenant_id = i.tenant_id AND k.ref = i.recipient_ref
          AND k.channel = i.channel) AS fact_consents
FROM intents i
LEFT JOIN destinations d
       ON d.tenant_id = i.tenant_id AND d.destination_hash = i.destination_hash
WHERE i.tenant_id = %(tenant_id)s AND i.id = %(id)s
  AND i.state IN ('pending', 'resend_due')
  AND i.channel = %(channel)s
  AND i.next_due_at <= %(now)s
  AND NOT EXISTS (
      SELECT 1 FROM controls c
      WHERE c.tenant_id = i.tenant_id AND c.kind = 'kill_switch' AND c.enabled
        AND c.channel IN ('', i.channel) AND c.country IN ('', coalesce(i.country, '')))
  AND NOT EXISTS (
      -- A tenant whose own traffic drew the account's back-off answers
      -- waits out its own hold; the others go on (dispatch/backoff.py).
      SELECT 1 FROM provider_backoffs b
      WHERE b.tenant_id = i.tenant_id AND b.account = %(account)s
        AND b.held_until > %(now)s)
FOR UPDATE OF i SKIP LOCKED;

-- name: passed_deadline_ids
-- passed_deadlines by id alone, for a sweep that could not read its batch.
SELECT tenant_id, id FROM intents
WHERE expires_at <= %(now)s
  AND state IN ('pending', 'sending', 'accepted', 'resend_due', 'reconciling')
ORDER BY expires_at
LIMIT %(limit)s;

-- name: passed_deadline_one
SELECT * FROM intents
WHERE tenant_id = %(tenant_id)s AND id = %(id)s
  AND expires_at <= %(now)s
  AND state IN ('pending', 'sending', 'accepted', 'resend_due', 'reconciling')
FOR UPDATE SKIP LOCKED;

-- name: quarantine_intent
-- Park one claimable intent the worker could not decode: `failed` with the
-- code UNDECODABLE, audited and announced like any move, and nothing in it
-- read back into Python. A tenant time outside the bounds the database
-- checks (a row written around them) is cleared, so the row passes those
-- checks again; the audit keeps what it was, as text.
WITH old AS (
    SELECT tenant_id, id, state,
           jsonb_build_object('expires_at', expires_at::text, 'not_before', not_before::text,
                              'next_due_at', next_due_at::text) AS was
    FROM intents
    WHERE tenant_id = %(tenant_id)s AND id = %(id)s AND state IN ('pending', 'resend_due')
    FOR UPDATE
), moved AS (
    UPDATE intents i SET
        state = 'failed',
        version = i.version + 1,
        updated_at = %(now)s,
        next_due_at = NULL,
        terminal_at = %(now)s,
        decision_code = 'UNDECODABLE',
        expires_at = CASE WHEN i.expires_at >= '1970-01-01 00:00:00+00'
                           AND i.expires_at < '9000-01-01 00:00:00+00' THEN i.expires_at END,
        not_before = CASE WHEN i.not_before >= '1970-01-01 00:00:00+00'
                           AND i.not_before < '9000-01-01 00:00:00+00' THEN i.not_before END
    FROM old
    WHERE i.tenant_id = old.tenant_id AND i.id = old.id
    RETURNING i.tenant_id, i.id, i.version, i.state, i.job_id, i.idempotency_key,
              i.event_class, i.channel, i.correlation_id, i.policy_version
), audit AS (
    INSERT INTO transitions (tenant_id, intent_id, version, from_state, to_state, event,
                             actor, input, policy_version, decision_code, at)
    SELECT m.tenant_id, m.id, m.version, o.state, m.state, 'quarantined', %(actor)s,
           jsonb_build_object('code', 'UNDECODABLE', 'error', %(error)s::text) || o.was,
           m.policy_version, 'UNDECODABLE', %(now)s
    FROM moved m JOIN old o ON o.tenant_id = m.tenant_id AND o.id = m.id
), announced AS (
    INSERT INTO events (tenant_id, type, intent_id, job_id, payload, created_at)
    SELECT m.tenant_id, 'intent.failed', m.id, m.job_id,
           jsonb_build_object(
               'intent_id', m.id, 'idempotency_key', m.idempotency_key, 'state', m.state,
               'event_class', m.event_class, 'channel', m.channel, 'code', 'UNDECODABLE',
               'cancel_reason', NULL, 'correlation_id', m.correlation_id,
               'version', m.version, 'at', %(now)s),
           %(now)s
    FROM moved m
)
SELECT tenant_id, id FROM moved;

-- name: metrics_quarantined
-- Quarantined intents per tenant and code, from rows (invariant 7).
SELECT tenant_id, decision_code AS code, count(*) AS n FROM intents
WHERE decision_code IN ('UNDECODABLE', 'UNRENDERABLE')
GROUP BY tenant_id, decision_code;

-- name: alert_quarantined
-- Tenants with intents quarantined since `since`, or rows and documents a
-- shared loop set aside (quarantine_log, 0027): the alert holds while any
-- is that recent, then resolves itself.
WITH q AS (
    SELECT tenant_id, terminal_at AS at,
           jsonb_build_object('intent_id', id, 'code', decision_code, 'at', terminal_at) AS sample
    FROM intents
    WHERE decision_code IN ('UNDECODABLE', 'UNRENDERABLE') AND terminal_at >= %(since)s
    UNION ALL
    SELECT tenant_id, at,
           jsonb_build_object('loop', loop, 'subject', subject, 'code', code, 'at', at)
    FROM quarantine_log WHERE at >= %(since)s
)
SELECT tenant_id, count(*) AS n, max(at) AS latest_at,
       (array_agg(sample ORDER BY at DESC))[1:5] AS samples
FROM q
GROUP BY tenant_id;

-- name: note_quarantine
-- One tenant's row or document a shared loop set aside (store/isolation.py).
-- Noted once an hour per subject: a loop that meets it every round must
-- not fill the table.
INSERT INTO quarantine_log (tenant_id, loop, subject, code, error, at)
SELECT %(tenant_id)s, %(loop)s, %(subject)s, %(code)s, %(error)s, %(now)s
WHERE NOT EXISTS (
    SELECT 1 FROM quarantine_log
    WHERE at > %(now)s - interval '1 hour' AND tenant_id = %(tenant_id)s
      AND loop = %(loop)s AND subject = %(subject)s AND code = %(code)s);

-- name: quarantine_sending
-- Park one `sending` intent whose lease expired and which the sweeper
-- cannot recover (its policy version missing or unreadable, the row
-- undecodable): its call may have started, so it is never resent; the
-- intent and its attempt end `unknown` with the code, audited, and nothing
-- is read back into Python. Receipts still settle the attempt.
WITH old AS (
    SELECT tenant_id, id FROM intents
    WHERE tenant_id = %(tenant_id)s AND id = %(id)s AND state = 'sending'
    FOR UPDATE
), moved AS (
    UPDATE intents i SET
        state = 'unknown',
        version = i.version + 1,
        updated_at = %(now)s,
        next_due_at = NULL,
        terminal_at = %(now)s,
        lease_owner = NULL,
        lease_expires_at = NULL,
        decision_code = %(code)s
    FROM old
    WHERE i.tenant_id = old.tenant_id AND i.id = old.id
    RETURNING i.tenant_id, i.id, i.version, i.policy_version, i.attempt_count
), settled AS (
    UPDATE attempts a SET state = 'unknown', code = %(code)s, last_status_at = %(now)s,
                          next_check_at = NULL
    FROM moved m
    WHERE a.tenant_id = m.tenant_id AND a.intent_id = m.id AND a.n = m.attempt_count
      AND a.state = 'sending'
), audit AS (
    INSERT INTO transitions (tenant_id, intent_id, version, from_state, to_state, event,
                             actor, input, policy_version, decision_code, at)
    SELECT m.tenant_id, m.id, m.version, 'sending', 'unknown', 'quarantined', %(actor)s,
           jsonb_build_object('code', %(code)s::text, 'error', %(error)s::text,
                              'attempt', m.attempt_count),
           m.policy_version, %(code)s, %(now)s
    FROM moved m
)
SELECT tenant_id, id FROM moved;

-- name: quarantine_job
-- A job whose preparation failed on its own rows or policy: no longer
-- picked (claim_preparing_job), so the jobs behind it are prepared.
UPDATE jobs SET quarantine_code = %(code)s, updated_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND id = %(id)s AND status = 'preparing'
RETURNING id;

-- name: expired_lease_ids
-- expired_leases by id alone, for a batch that could not be read whole.
SELECT tenant_id, id FROM intents
WHERE state = 'sending' AND lease_expires_at < %(now)s
ORDER BY lease_expires_at
LIMIT %(limit)s;

-- name: expired_lease_one
SELECT * FROM intents
WHERE tenant_id = %(tenant_id)s AND id = %(id)s
  AND state = 'sending' AND lease_expires_at < %(now)s
FOR UPDATE SKIP LOCKED;
