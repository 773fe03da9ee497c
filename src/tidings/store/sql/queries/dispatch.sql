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

-- name: shadow_controls
SELECT tenant_id, channel, country FROM controls
WHERE kind = 'shadow_mode' AND enabled AND tenant_id = ANY(%(tenants)s);

-- name: heartbeat
-- Rows locked right now (a group's answers being recorded, a cancel) are
-- skipped, not waited for: their move ends or renews the lease anyway, and
-- waiting on them, in whatever order the rows come, deadlocked against the
-- same worker's recording of a group.
-- The outer match is on the primary key: by `id` alone it is a scan of
-- the table for each leased row (docs/benchmarks.md, "Measurements behind
-- the code").
UPDATE intents SET lease_expires_at = %(lease_expires_at)s
WHERE (tenant_id, id) IN (
    SELECT tenant_id, id FROM intents
    WHERE state = 'sending' AND lease_owner = %(owner)s AND id = ANY(%(ids)s)
    FOR UPDATE SKIP LOCKED
);

-- name: expired_leases
SELECT * FROM intents
WHERE state = 'sending' AND lease_expires_at < %(now)s
ORDER BY lease_expires_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: passed_deadlines
SELECT * FROM intents
WHERE expires_at <= %(now)s
  AND state IN ('pending', 'sending', 'accepted', 'resend_due', 'reconciling')
ORDER BY expires_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: record_observation
-- A receipt, lookup or answer about one of an intent's attempts, once per
-- provider event: one event always names the same attempt, so the intent
-- is part of the key (it is the partition key, 0026).
INSERT INTO observations (tenant_id, provider, dedupe_key, intent_id, attempt_n,
                          provider_message_id, status, code, raw_status, source,
                          occurred_at, received_at, raw)
VALUES (%(tenant_id)s, %(provider)s, %(dedupe_key)s, %(intent_id)s, %(attempt_n)s,
        %(provider_message_id)s, %(status)s, %(code)s, %(raw_status)s, %(source)s,
        %(occurred_at)s, %(now)s, %(raw)s)
ON CONFLICT (tenant_id, intent_id, provider, dedupe_key) DO NOTHING
RETURNING id;

-- name: record_unmatched_observation
-- A receipt that names no attempt we know yet, kept until one is recorded.
INSERT INTO unmatched_observations (tenant_id, provider, dedupe_key, provider_message_id,
                                    status, code, raw_status, source, occurred_at,
                                    received_at, raw)
VALUES (%(tenant_id)s, %(provider)s, %(dedupe_key)s, %(provider_message_id)s, %(status)s,
        %(code)s, %(raw_status)s, %(source)s, %(occurred_at)s, %(now)s, %(raw)s)
ON CONFLICT (tenant_id, provider, dedupe_key) DO NOTHING
RETURNING id;

-- name: observation_effect
UPDATE observations SET effect = %(effect)s
WHERE tenant_id = %(tenant_id)s AND intent_id = %(intent_id)s AND id = %(id)s;

-- name: unmatched_observation_effect
UPDATE unmatched_observations SET effect = %(effect)s
WHERE tenant_id = %(tenant_id)s AND id = %(id)s;

-- name: set_control
INSERT INTO controls (tenant_id, kind, channel, country, enabled, updated_at, updated_by)
VALUES (%(tenant_id)s, %(kind)s, %(channel)s, %(country)s, %(enabled)s, %(now)s, %(actor)s)
ON CONFLICT (tenant_id, kind, channel, country)
DO UPDATE SET enabled = EXCLUDED.enabled, updated_at = EXCLUDED.updated_at,
              updated_by = EXCLUDED.updated_by;

-- name: controls_of
SELECT kind, channel, country, enabled, updated_at, updated_by FROM controls
WHERE tenant_id = %(tenant_id)s ORDER BY kind, channel, country;

-- name: provider_ids_recording
-- A worker about to record the provider ids its calls got: shared, so
-- recording workers never wait on each other, only on a receipt that holds
-- one of these ids' buckets while it looks for their attempts.
SELECT pg_advisory_xact_lock_shared(k)
FROM (SELECT DISTINCT hashtextextended(p || ' ' || m, 11) %% 128 AS k
      FROM unnest(%(providers)s::text[], %(ids)s::text[]) AS u(p, m)
      ORDER BY k) AS buckets;

-- name: provider_ids_unseen
-- A receipt naming provider ids no attempt shows yet: waits for the record
-- that may be writing them, then looks again (see dispatch/observe.py, apply_received).
SELECT pg_advisory_xact_lock(k)
FROM (SELECT DISTINCT hashtextextended(p || ' ' || m, 11) %% 128 AS k
      FROM unnest(%(providers)s::text[], %(ids)s::text[]) AS u(p, m)
      ORDER BY k) AS buckets;

-- name: unmatched_for
-- Observations that arrived before we knew the provider's id for them
-- (a webhook racing the send's own commit), waiting to be matched.
SELECT * FROM unmatched_observations
WHERE provider = %(provider)s AND provider_message_id = %(provider_message_id)s
ORDER BY id
FOR UPDATE;

-- name: observation_matched
-- An early receipt joins its attempt's observations, under the attempt's
-- tenant, and leaves the unmatched ones. A copy of the same provider event
-- that arrived after the match is already there: this one then just goes.
WITH moved AS (
    DELETE FROM unmatched_observations
    WHERE tenant_id = %(old_tenant_id)s AND id = %(id)s
    RETURNING *
)
INSERT INTO observations (tenant_id, provider, dedupe_key, intent_id, attempt_n,
                          provider_message_id, status, code, raw_status, source,
                          occurred_at, received_at, effect, raw)
SELECT %(tenant_id)s, m.provider, m.dedupe_key, %(intent_id)s, %(attempt_n)s,
       m.provider_message_id, m.status, m.code, m.raw_status, m.source, m.occurred_at,
       m.received_at, %(effect)s, m.raw
FROM moved m
ON CONFLICT (tenant_id, intent_id, provider, dedupe_key) DO NOTHING;
