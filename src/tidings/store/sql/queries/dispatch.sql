-- name: claim_due
-- Due intents of one channel in keyset order. SKIP LOCKED lets workers
-- share the queue without waiting on each other; rows covered by an enabled
-- kill switch are never claimed, so they cost nothing while it is on.
-- What the gate and the send need comes along, so a claim is one round
-- trip for the whole batch: the destination's ciphertext, its opt-out and
-- suppression, the contact's time zone and consent evidence.
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
                   'purpose', k.purpose, 'captured_at', k.captured_at,
                   'revoked_at', k.revoked_at)), '[]'::jsonb)
        FROM consents k
        WHERE k.tenant_id = i.tenant_id AND k.ref = i.recipient_ref
          AND k.channel = i.channel) AS fact_consents
FROM intents i
LEFT JOIN destinations d
       ON d.tenant_id = i.tenant_id AND d.destination_hash = i.destination_hash
WHERE i.state IN ('pending', 'resend_due')
  AND i.channel = %(channel)s
  AND i.next_due_at <= %(now)s
  AND NOT EXISTS (
      SELECT 1 FROM controls c
      WHERE c.tenant_id = i.tenant_id AND c.kind = 'kill_switch' AND c.enabled
        AND c.channel IN ('', i.channel) AND c.country IN ('', coalesce(i.country, '')))
ORDER BY i.next_due_at, i.id
LIMIT %(limit)s
FOR UPDATE OF i SKIP LOCKED;

-- name: shadow_controls
SELECT tenant_id, channel, country FROM controls
WHERE kind = 'shadow_mode' AND enabled AND tenant_id = ANY(%(tenants)s);

-- name: open_attempts
-- The attempts a claim starts, one row each, in one statement.
INSERT INTO attempts (tenant_id, intent_id, n, attempt_key, channel, state, provider, created_at)
SELECT t.tenant_id, t.intent_id, t.n, t.attempt_key, t.channel, 'sending', %(provider)s, %(now)s
FROM jsonb_to_recordset(%(rows)s::jsonb)
     AS t (tenant_id text, intent_id uuid, n int, attempt_key text, channel text)
LIMIT %(count)s;

-- name: attempt_accepted
-- Accepted by the provider. Runs whether or not the intent could still
-- move (a cancel may have won): the fact belongs to the attempt.
UPDATE attempts SET
    state = 'accepted',
    provider_message_id = %(provider_message_id)s,
    accepted_at = coalesce(accepted_at, %(now)s),
    last_status_at = %(now)s,
    next_check_at = %(next_check_at)s,
    checks_expire_at = %(checks_expire_at)s
WHERE tenant_id = %(tenant_id)s AND intent_id = %(intent_id)s AND n = %(n)s
  AND state IN ('sending', 'unknown')
RETURNING *,
    -- whether receipts for this provider id arrived before we knew it
    EXISTS (SELECT 1 FROM observations o
            WHERE o.intent_id IS NULL AND o.provider = attempts.provider
              AND o.provider_message_id = %(provider_message_id)s) AS has_unmatched;

-- name: attempts_accepted
-- `attempt_accepted` for a batch, with the segments each message counted.
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(rows)s::jsonb)
         AS t (tenant_id text, intent_id uuid, n int, provider_message_id text, segments int,
               encoding text, next_check_at timestamptz, checks_expire_at timestamptz)
    -- The batch's size, so the planner knows how many rows come: a set-
    -- returning function is taken for 100, and a young attempts table
    -- (no statistics yet) was then scanned whole instead of probed.
    LIMIT %(count)s
)
UPDATE attempts a SET
    state = 'accepted',
    provider_message_id = t.provider_message_id,
    segments = coalesce(t.segments, a.segments),
    encoding = coalesce(t.encoding, a.encoding),
    accepted_at = coalesce(a.accepted_at, %(now)s),
    last_status_at = %(now)s,
    next_check_at = t.next_check_at,
    checks_expire_at = t.checks_expire_at
FROM input t
-- A plain join: each input row is one primary-key probe. (The keys as
-- extra `= ANY` array conditions let the planner, with no statistics yet
-- on a young attempts table, scan all of the tenant's attempts instead:
-- 2 ms a batch at 10k attempts, against 0.6 ms.)
WHERE a.tenant_id = t.tenant_id AND a.intent_id = t.intent_id AND a.n = t.n
  AND a.state IN ('sending', 'unknown')
RETURNING a.tenant_id, a.intent_id, a.n,
    EXISTS (SELECT 1 FROM observations o
            WHERE o.intent_id IS NULL AND o.provider = a.provider
              AND o.provider_message_id = t.provider_message_id) AS has_unmatched;

-- name: attempt_settled
UPDATE attempts SET
    state = %(state)s,
    code = coalesce(%(code)s::text, code),
    -- A delivery receipt proves the provider had the message, even when its
    -- own answer to the send never arrived.
    accepted_at = CASE WHEN %(state)s IN ('delivered', 'undelivered')
                       THEN coalesce(accepted_at, %(now)s) ELSE accepted_at END,
    last_status_at = %(now)s,
    terminal_at = CASE WHEN %(state)s IN ('delivered', 'undelivered', 'failed')
                       THEN %(now)s END,
    next_check_at = %(next_check_at)s::timestamptz,
    checks_expire_at = coalesce(%(checks_expire_at)s::timestamptz, checks_expire_at)
WHERE tenant_id = %(tenant_id)s AND intent_id = %(intent_id)s AND n = %(n)s
  AND state = ANY(%(from_states)s)
RETURNING *;

-- name: attempt_checked
UPDATE attempts SET check_count = check_count + 1, next_check_at = %(next_check_at)s
WHERE tenant_id = %(tenant_id)s AND intent_id = %(intent_id)s AND n = %(n)s;

-- name: attempt_by_number
SELECT * FROM attempts WHERE tenant_id = %(tenant_id)s AND intent_id = %(intent_id)s AND n = %(n)s;

-- name: attempts_by_provider_id
-- A receipt's attempt by the id the provider (account) gave it. Two rows
-- mean the id is ambiguous, so the caller matches neither: at most two.
SELECT * FROM attempts
WHERE provider = %(provider)s AND provider_message_id = %(provider_message_id)s
LIMIT 2;

-- name: attempts_by_reference
-- A receipt's attempt by the reference of ours the provider echoed, sent
-- through that same provider. The reference spans tenants: new ones carry
-- the intent's globally unique id, so one row at most; a key from before
-- them (`<caller key>:attempt:<n>`) may be shared by two tenants, and two
-- rows mean the caller matches neither.
SELECT * FROM attempts
WHERE attempt_key = %(attempt_key)s AND provider = %(provider)s
LIMIT 2;

-- name: attempts_reached_provider
SELECT count(*) AS n FROM attempts
WHERE tenant_id = %(tenant_id)s AND intent_id = %(intent_id)s
  AND (accepted_at IS NOT NULL OR state IN ('delivered', 'undelivered'));

-- name: heartbeat
-- Rows locked right now (a group's answers being recorded, a cancel) are
-- skipped, not waited for: their move ends or renews the lease anyway, and
-- waiting on them, in whatever order the rows come, deadlocked against the
-- same worker's recording of a group.
-- The outer match is on the primary key: by `id` alone it was a scan of
-- the table for each leased row (20 ms at 20k intents).
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

-- name: due_checks
-- Attempts whose status is due for a look, with their intents.
SELECT a.*, i.state AS intent_state, i.version AS intent_version
FROM attempts a JOIN intents i ON i.tenant_id = a.tenant_id AND i.id = a.intent_id
WHERE a.state IN ('sending', 'accepted', 'unknown') AND a.next_check_at <= %(now)s
ORDER BY a.next_check_at
LIMIT %(limit)s
FOR UPDATE OF a SKIP LOCKED;

-- name: passed_deadlines
SELECT * FROM intents
WHERE expires_at <= %(now)s
  AND state IN ('pending', 'sending', 'accepted', 'resend_due', 'reconciling')
ORDER BY expires_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: record_observation
INSERT INTO observations (tenant_id, provider, dedupe_key, intent_id, attempt_n,
                          provider_message_id, status, code, raw_status, source,
                          occurred_at, received_at, raw)
VALUES (%(tenant_id)s, %(provider)s, %(dedupe_key)s, %(intent_id)s, %(attempt_n)s,
        %(provider_message_id)s, %(status)s, %(code)s, %(raw_status)s, %(source)s,
        %(occurred_at)s, %(now)s, %(raw)s)
ON CONFLICT (tenant_id, provider, dedupe_key) DO NOTHING
RETURNING id;

-- name: observation_effect
UPDATE observations SET effect = %(effect)s WHERE tenant_id = %(tenant_id)s AND id = %(id)s;

-- name: set_control
INSERT INTO controls (tenant_id, kind, channel, country, enabled, updated_at, updated_by)
VALUES (%(tenant_id)s, %(kind)s, %(channel)s, %(country)s, %(enabled)s, %(now)s, %(actor)s)
ON CONFLICT (tenant_id, kind, channel, country)
DO UPDATE SET enabled = EXCLUDED.enabled, updated_at = EXCLUDED.updated_at,
              updated_by = EXCLUDED.updated_by;

-- name: controls_of
SELECT kind, channel, country, enabled, updated_at, updated_by FROM controls
WHERE tenant_id = %(tenant_id)s ORDER BY kind, channel, country;

-- name: attempt_segments
UPDATE attempts SET segments = %(segments)s, encoding = %(encoding)s
WHERE tenant_id = %(tenant_id)s AND intent_id = %(intent_id)s AND n = %(n)s;

-- name: unmatched_for
-- Observations that arrived before we knew the provider's id for them
-- (a webhook racing the send's own commit), waiting to be matched.
SELECT * FROM observations
WHERE intent_id IS NULL AND provider = %(provider)s
  AND provider_message_id = %(provider_message_id)s
ORDER BY id
FOR UPDATE;

-- name: observation_matched
UPDATE observations SET tenant_id = %(tenant_id)s, intent_id = %(intent_id)s,
                        attempt_n = %(attempt_n)s, effect = %(effect)s
WHERE tenant_id = %(old_tenant_id)s AND id = %(id)s;

-- name: reschedule_check
UPDATE attempts SET next_check_at = %(next_check_at)s
WHERE tenant_id = %(tenant_id)s AND intent_id = %(intent_id)s AND n = %(n)s;

-- name: still_claimed
-- Claims about to be called, read again right before the call (seed 000,
-- invariant 5): each one's state, version and lease owner as committed
-- now, and whether a kill switch turned on since the claim covers it.
SELECT i.id, i.state, i.version, i.lease_owner,
       EXISTS (
           SELECT 1 FROM controls c
           WHERE c.tenant_id = i.tenant_id AND c.kind = 'kill_switch' AND c.enabled
             AND c.channel IN ('', i.channel) AND c.country IN ('', coalesce(i.country, ''))
       ) AS killed
FROM intents i
WHERE (i.tenant_id, i.id) IN (
    SELECT * FROM unnest(%(tenant_ids)s::text[], %(ids)s::uuid[])
);
