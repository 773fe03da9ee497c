-- name: claim_due_ids
-- The claim's batch by id alone (dispatch/quarantine.py): what claim_due
-- would lock, without any column a worker might fail to decode. Only read
-- when the batch could not be claimed whole.
SELECT i.tenant_id, i.id
FROM intents i
WHERE i.state IN ('pending', 'resend_due')
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
ORDER BY i.next_due_at, i.id
LIMIT %(limit)s;

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
-- Tenants with intents quarantined since `since`: the alert holds while
-- any is that recent, then resolves itself.
SELECT tenant_id, count(*) AS n, max(terminal_at) AS latest_at,
       (array_agg(jsonb_build_object('intent_id', id, 'code', decision_code,
                                     'at', terminal_at) ORDER BY terminal_at DESC))[1:5]
           AS samples
FROM intents
WHERE decision_code IN ('UNDECODABLE', 'UNRENDERABLE') AND terminal_at >= %(since)s
GROUP BY tenant_id;
