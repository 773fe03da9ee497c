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
    EXISTS (SELECT 1 FROM unmatched_observations o
            WHERE o.provider = attempts.provider
              AND o.provider_message_id = %(provider_message_id)s) AS has_unmatched;

-- name: attempts_accepted
-- `attempt_accepted` for a batch, with the segments each message counted.
-- Planned for the batch at hand: a generic plan made while the month's
-- partition was young read all of it for every batch, for good.
-- plan: each time
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
    EXISTS (SELECT 1 FROM unmatched_observations o
            WHERE o.provider = a.provider
              AND o.provider_message_id = t.provider_message_id) AS has_unmatched;

-- name: attempt_segments
UPDATE attempts SET segments = %(segments)s, encoding = %(encoding)s
WHERE tenant_id = %(tenant_id)s AND intent_id = %(intent_id)s AND n = %(n)s;

-- name: attempt_settled
UPDATE attempts SET
    state = %(state)s,
    code = coalesce(%(code)s::text, code),
    -- A receipt or search matched by our reference names the provider's id.
    provider_message_id = coalesce(provider_message_id, %(provider_message_id)s::text),
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
-- Attempts whose status is due for a look, with their intents, each leased
-- in the same statement: its check counted and pushed to `lease_until`, so
-- other workers leave it alone while this one looks it up. The values
-- returned are those before the lease (the schedule counts from them).
-- A check that comes late moves the budget's end (and with it the schedule,
-- dispatch/reconcile.py) on by as much: time spent queued on our side is not
-- time the provider had to tell us, and an outcome left unknown must mean the
-- provider could not tell, not that we did not ask in time.
WITH due AS (
    SELECT a.tenant_id, a.intent_id, a.n
    FROM attempts a
    WHERE a.state IN ('sending', 'accepted', 'unknown') AND a.next_check_at <= %(now)s
    ORDER BY a.next_check_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), leased AS (
    UPDATE attempts a SET check_count = a.check_count + 1, next_check_at = %(lease_until)s,
        checks_expire_at = a.checks_expire_at + greatest(%(now)s - a.next_check_at, interval '0')
    FROM due d
    WHERE a.tenant_id = d.tenant_id AND a.intent_id = d.intent_id AND a.n = d.n
    RETURNING a.tenant_id, a.intent_id, a.n
)
SELECT a.*, i.state AS intent_state, i.version AS intent_version,
       i.destination_hash AS intent_destination_hash
FROM leased l
JOIN attempts a ON a.tenant_id = l.tenant_id AND a.intent_id = l.intent_id AND a.n = l.n
JOIN intents i ON i.tenant_id = a.tenant_id AND i.id = a.intent_id
ORDER BY a.next_check_at;

-- name: reschedule_check
UPDATE attempts SET next_check_at = %(next_check_at)s,
                    check_count = coalesce(%(checks_done)s::int, check_count)
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

-- name: attempts_by_reference_of_intent
-- `attempts_by_reference` for a reference made from an intent's id (every
-- new one): the id names the month's partition, so one is read, not each.
SELECT * FROM attempts
WHERE intent_id = %(intent_id)s AND attempt_key = %(attempt_key)s AND provider = %(provider)s
LIMIT 2;

-- name: attempts_reached_provider
SELECT count(*) AS n FROM attempts
WHERE tenant_id = %(tenant_id)s AND intent_id = %(intent_id)s
  AND (accepted_at IS NOT NULL OR state IN ('delivered', 'undelivered'));

-- name: attempts_call_started
-- The durable "call started" mark, for a group of calls about to go out,
-- and the last read of each claim's committed state before its call
-- (R000.5 in docs/requirements.md): an attempt is marked only while it is
-- still `sending` and unmarked, and its intent is still `sending` at the
-- claim's version under this worker's lease with no kill switch covering
-- it, and no opt-out or suppression of its destination has been committed
-- since the claim read them (`opted_out`, `suppressed`: what the claim
-- saw), and its provider account is not paused for it (a pause another
-- worker's answers began after this claim). The caller calls exactly the
-- marked ones. Lease recovery locks the
-- attempt row before it decides (attempt_for_recovery), so a mark and a
-- recovery never both win: a mark waiting on that lock finds the row gone.
--
-- Planned for the group at hand, never kept as a prepared statement's
-- generic plan: one made while the month's attempts partition was young
-- (or, as in the benchmark, empty after an ANALYZE) joins the group to the
-- partition by a sequential scan, and keeps scanning it for every group as
-- it grows until the next analysis (22 buffers per intent at 2,000
-- intents; docs/benchmarks.md, "The call-started mark's plan").
-- plan: each time
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(rows)s::jsonb)
         AS t (tenant_id text, intent_id uuid, n int, version int,
               opted_out boolean, suppressed boolean, account text)
    LIMIT %(count)s  -- the batch's size, for the planner (see attempts_accepted)
), checked AS (
    SELECT t.tenant_id, t.intent_id, t.n,
           (i.state = 'sending' AND i.version = t.version
            AND i.lease_owner = %(owner)s) AS held,
           EXISTS (
               SELECT 1 FROM controls c
               WHERE c.tenant_id = i.tenant_id AND c.kind = 'kill_switch' AND c.enabled
                 AND c.channel IN ('', i.channel) AND c.country IN ('', coalesce(i.country, ''))
                 AND c.purpose IN ('', i.purpose) AND c.event_class IN ('', i.event_class)
           ) AS killed,
           (NOT t.opted_out AND EXISTS (
               SELECT 1 FROM opt_outs o
               WHERE o.tenant_id = i.tenant_id AND o.channel = i.channel
                 AND o.destination_hash = i.destination_hash))
           OR (NOT t.suppressed AND EXISTS (
               SELECT 1 FROM suppressions s
               WHERE s.tenant_id = i.tenant_id AND s.channel = i.channel
                 AND s.destination_hash = i.destination_hash)) AS stopped,
           -- greatest() skips NULLs: NULL when neither pause holds.
           greatest(
               (SELECT p.paused_until FROM provider_pauses p
                WHERE p.account = t.account AND p.paused_until > %(now)s),
               (SELECT b.held_until FROM provider_backoffs b
                WHERE b.tenant_id = t.tenant_id AND b.account = t.account
                  AND b.held_until > %(now)s)) AS paused_until
    FROM input t JOIN intents i ON i.tenant_id = t.tenant_id AND i.id = t.intent_id
), marked AS (
    UPDATE attempts a SET call_started_at = %(now)s
    FROM checked c
    WHERE a.tenant_id = c.tenant_id AND a.intent_id = c.intent_id AND a.n = c.n
      AND c.held AND NOT c.killed AND NOT c.stopped AND c.paused_until IS NULL
      AND a.state = 'sending' AND a.call_started_at IS NULL
    RETURNING a.tenant_id, a.intent_id, a.n
)
SELECT c.tenant_id, c.intent_id, c.n, c.held, c.killed, c.stopped, c.paused_until,
       m.n IS NOT NULL AS marked
FROM checked c
LEFT JOIN marked m ON m.tenant_id = c.tenant_id AND m.intent_id = c.intent_id AND m.n = c.n;

-- name: attempt_for_recovery
-- The attempt of an intent whose lease expired, locked, or LockNotAvailable
-- at once: its worker holds it (a mark or a record under way), and a record
-- locks the attempt before the intent, which the sweeper already holds, so
-- waiting here could deadlock. The sweep leaves the intent to the next one.
SELECT * FROM attempts
WHERE tenant_id = %(tenant_id)s AND intent_id = %(intent_id)s AND n = %(n)s
FOR UPDATE NOWAIT;

-- name: attempt_unstarted_withdrawn
-- A claim whose call never started leaves no attempt: its intent is due
-- again under the same number and key, and the audit keeps the claim.
DELETE FROM attempts
WHERE tenant_id = %(tenant_id)s AND intent_id = %(intent_id)s AND n = %(n)s
  AND state = 'sending' AND call_started_at IS NULL
RETURNING n;

-- name: open_calls_to_destination
-- Other calls of ours to one destination through one provider account,
-- started in a time range and still without a provider id: any of them
-- could own a message a list search finds (dispatch/lookup.py).
SELECT count(*) AS n
FROM attempts a JOIN intents i ON i.tenant_id = a.tenant_id AND i.id = a.intent_id
WHERE a.provider = %(provider)s AND a.provider_message_id IS NULL
  AND a.state IN ('sending', 'unknown') AND a.call_started_at IS NOT NULL
  AND a.call_started_at BETWEEN %(since)s AND %(until)s
  AND a.channel = %(channel)s AND i.destination_hash = %(destination_hash)s
  AND NOT (a.tenant_id = %(tenant_id)s AND a.intent_id = %(intent_id)s AND a.n = %(n)s);

-- name: attempt_response_body
UPDATE attempts SET response_body = %(response_body)s
WHERE tenant_id = %(tenant_id)s AND intent_id = %(intent_id)s AND n = %(n)s;

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
