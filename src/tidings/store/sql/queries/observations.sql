-- name: record_observation
-- A receipt, lookup or answer about one of an intent's attempts, once per
-- provider event: one event always names the same attempt, so the intent
-- is part of the key (it is the partition key, 0026). The attempt's channel
-- goes with it: the newest reconciliation per channel is read from it (0037).
INSERT INTO observations (tenant_id, provider, dedupe_key, intent_id, attempt_n,
                          provider_message_id, status, code, raw_status, source,
                          occurred_at, received_at, raw, channel)
VALUES (%(tenant_id)s, %(provider)s, %(dedupe_key)s, %(intent_id)s, %(attempt_n)s,
        %(provider_message_id)s, %(status)s, %(code)s, %(raw_status)s, %(source)s,
        %(occurred_at)s, %(now)s, %(raw)s, %(channel)s)
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
                          occurred_at, received_at, effect, raw, channel)
SELECT %(tenant_id)s, m.provider, m.dedupe_key, %(intent_id)s, %(attempt_n)s,
       m.provider_message_id, m.status, m.code, m.raw_status, m.source, m.occurred_at,
       m.received_at, %(effect)s, m.raw, %(channel)s
FROM moved m
ON CONFLICT (tenant_id, intent_id, provider, dedupe_key) DO NOTHING;
