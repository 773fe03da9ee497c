-- Attempts: one row per provider call. Written only through store/attempts.py.

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
-- on a young attempts table, scan all of the tenant's attempts instead;
-- docs/benchmarks.md, "Measurements behind the code".)
WHERE a.tenant_id = t.tenant_id AND a.intent_id = t.intent_id AND a.n = t.n
  AND a.state IN ('sending', 'unknown')
RETURNING a.tenant_id, a.intent_id, a.n,
    EXISTS (SELECT 1 FROM observations o
            WHERE o.intent_id IS NULL AND o.provider = a.provider
              AND o.provider_message_id = t.provider_message_id) AS has_unmatched;

-- name: attempt_segments
UPDATE attempts SET segments = %(segments)s, encoding = %(encoding)s
WHERE tenant_id = %(tenant_id)s AND intent_id = %(intent_id)s AND n = %(n)s;

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

-- name: due_checks
-- Attempts whose status is due for a look, with their intents.
SELECT a.*, i.state AS intent_state, i.version AS intent_version
FROM attempts a JOIN intents i ON i.tenant_id = a.tenant_id AND i.id = a.intent_id
WHERE a.state IN ('sending', 'accepted', 'unknown') AND a.next_check_at <= %(now)s
ORDER BY a.next_check_at
LIMIT %(limit)s
FOR UPDATE OF a SKIP LOCKED;

-- name: attempt_checked
UPDATE attempts SET check_count = check_count + 1, next_check_at = %(next_check_at)s
WHERE tenant_id = %(tenant_id)s AND intent_id = %(intent_id)s AND n = %(n)s;

-- name: reschedule_check
UPDATE attempts SET next_check_at = %(next_check_at)s
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
