-- name: claim_due
-- Due intents of one channel, taken by lane (sql/fragments/due_lanes.sql):
-- a single intent never waits behind a job's backlog, and the jobs sending
-- share what is left. What the gate and the send need comes along, so a
-- claim is one round trip for the whole batch: the destination's
-- ciphertext, its opt-out and suppression, the contact's time zone and
-- consent evidence.
WITH RECURSIVE /* include: due_lanes */
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
FROM picked p
JOIN intents i ON i.tenant_id = p.tenant_id AND i.id = p.id
LEFT JOIN destinations d
       ON d.tenant_id = i.tenant_id AND d.destination_hash = i.destination_hash
ORDER BY p.place;

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
        AND c.channel IN ('', i.channel) AND c.country IN ('', coalesce(i.country, ''))
        AND c.purpose IN ('', i.purpose) AND c.event_class IN ('', i.event_class))
  AND NOT EXISTS (
      -- A tenant whose own traffic drew the account's back-off answers
      -- waits out its own hold; the others go on (dispatch/backoff.py).
      SELECT 1 FROM provider_backoffs b
      WHERE b.tenant_id = i.tenant_id AND b.account = %(account)s
        AND b.held_until > %(now)s)
FOR UPDATE OF i SKIP LOCKED;

-- name: claim_without_jit
-- For the rest of the claim's transaction. The planner prices the claim's
-- lanes as if it read every tenant's and every job's backlog (a CTE it
-- cannot count is taken for 100 rows), so past a few hundred thousand
-- intents the price crosses jit_above_cost and jit_optimize_above_cost:
-- compiling it then took 7.6 s of a 7.7 s claim on PostgreSQL 15 with
-- LLVM (the hour's soak, docs/reliability.md), for a read of 20 rows.
SELECT set_config('jit', 'off', true);
