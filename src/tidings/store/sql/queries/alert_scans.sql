-- The alert conditions the sweeper evaluates, read from ledger rows
-- (store/alert_scans.py). State lists are written out literally where a
-- partial index has the same predicate, so the planner can use it.

-- name: alert_unreconciled
-- Per event class and channel: what the page must name. Read in bounded
-- parts, whatever the backlog (issue 38, item 4; before, every intent in
-- flight was read: 2 to 4 s with 100,000 accepted and no receipts):
-- * how many are in flight, exact, from the kept counts (0043);
-- * the oldest call in flight, exact, from intents_unreconciled (0047);
-- * intents whose reconciliation gave up (`unknown`, within the window):
--   still unreconciled, since giving up must not clear the alert; counted
--   up to the cap and one more, the oldest call among those counted;
-- * recipients: distinct among the oldest `cap` in flight and the
--   given-up ones counted: exact up to the cap, and past it "at least"
--   (the caller makes the cap at least every page threshold);
-- * jobs, reports, templates: among those same rows; providers: among 100
--   of them (those in flight first), one attempt probe each.
-- The report is a column (jobs) or a variable.
WITH c AS (
    SELECT tenant_id, event_class, channel,
           coalesce(sum(n) FILTER (WHERE state IN ('sending', 'accepted', 'reconciling')),
                    0)::bigint AS in_flight,
           coalesce(sum(n) FILTER (WHERE state = 'unknown'), 0)::bigint AS unknown_kept
    FROM intent_counts
    WHERE state IN ('sending', 'accepted', 'reconciling', 'unknown')
    GROUP BY tenant_id, event_class, channel
    HAVING sum(n) FILTER (WHERE state IN ('sending', 'accepted', 'reconciling')) > 0
        OR sum(n) FILTER (WHERE state = 'unknown') > 0
), s AS (
    SELECT c.tenant_id, c.event_class, c.channel, x.*
    FROM c
    CROSS JOIN LATERAL (
        (SELECT i.id, i.attempt_count, i.created_at, i.recipient_ref, i.job_id,
                i.template_name, i.template_revision, i.report_id, i.report_revision,
                i.variables, false AS given_up
         FROM intents i
         WHERE c.in_flight > 0
           AND i.tenant_id = c.tenant_id AND i.event_class = c.event_class
           AND i.channel = c.channel AND i.state IN ('sending', 'accepted', 'reconciling')
         ORDER BY coalesce(i.claimed_at, i.created_at)
         LIMIT %(cap)s)
        UNION ALL
        (SELECT i.id, i.attempt_count, i.created_at, i.recipient_ref, i.job_id,
                i.template_name, i.template_revision, i.report_id, i.report_revision,
                i.variables, true AS given_up
         FROM intents i
         WHERE c.unknown_kept > 0
           AND i.tenant_id = c.tenant_id AND i.event_class = c.event_class
           AND i.channel = c.channel AND i.state = 'unknown'
           AND i.terminal_at >= %(unknown_since)s
         ORDER BY i.terminal_at
         LIMIT %(cap)s + 1)
    ) AS x
), g AS (
    SELECT s.tenant_id, s.event_class, s.channel,
           count(*) FILTER (WHERE s.given_up) AS unknown,
           count(DISTINCT s.recipient_ref) AS recipients,
           (array_agg(DISTINCT s.job_id::text) FILTER (WHERE s.job_id IS NOT NULL))[1:10]
               AS job_ids,
           (array_agg(DISTINCT r.id || coalesce(' rev ' || r.revision, ''))
                FILTER (WHERE r.id IS NOT NULL))[1:10] AS report_ids,
           (array_agg(DISTINCT s.template_name || coalesce(' rev ' || s.template_revision, '')))
               [1:10] AS templates
    FROM s
    CROSS JOIN LATERAL (
        SELECT coalesce(s.report_id, s.variables ->> 'report_id',
                        s.variables -> 'report' ->> 'id') AS id,
               coalesce(s.report_revision::text, s.variables ->> 'report_revision',
                        s.variables -> 'report' ->> 'revision') AS revision
    ) AS r
    GROUP BY s.tenant_id, s.event_class, s.channel
), given_up_oldest AS (
    -- Each attempt one primary-key probe (a subquery: no plan joins the
    -- attempts whole).
    SELECT s.tenant_id, s.event_class, s.channel,
           (array_agg(s.id ORDER BY t.at, s.id))[1] AS id, min(t.at) AS at
    FROM s
    CROSS JOIN LATERAL (
        SELECT coalesce((SELECT coalesce(a.call_started_at, a.created_at) FROM attempts a
                         WHERE a.tenant_id = s.tenant_id AND a.intent_id = s.id
                           AND a.n = s.attempt_count), s.created_at) AS at
    ) AS t
    WHERE s.given_up
    GROUP BY s.tenant_id, s.event_class, s.channel
), providers AS (
    SELECT p.tenant_id, p.event_class, p.channel,
           (array_agg(DISTINCT p.provider) FILTER (WHERE p.provider IS NOT NULL))[1:10]
               AS providers
    FROM (SELECT s.tenant_id, s.event_class, s.channel,
                 (SELECT a.provider FROM attempts a
                  WHERE a.tenant_id = s.tenant_id AND a.intent_id = s.id
                    AND a.n = s.attempt_count) AS provider
          FROM (SELECT s.*, row_number() OVER (PARTITION BY s.tenant_id, s.event_class,
                                                            s.channel ORDER BY s.given_up) AS k
                FROM s) AS s
          WHERE s.k <= 100) AS p
    GROUP BY p.tenant_id, p.event_class, p.channel
)
SELECT c.tenant_id, c.event_class, c.channel,
       (c.in_flight + least(g.unknown, %(cap)s))::bigint AS intents,
       least(g.unknown, %(cap)s)::bigint AS unknown, g.unknown > %(cap)s AS unknown_more,
       g.recipients, c.in_flight > %(cap)s OR g.unknown > %(cap)s AS recipients_more,
       CASE WHEN u.at IS NULL OR u.at > o.oldest_at THEN o.oldest_at ELSE u.at END
           AS oldest_at,
       CASE WHEN u.at IS NULL OR u.at > o.oldest_at THEN o.oldest_id ELSE u.id END
           AS oldest_id,
       g.job_ids, g.report_ids, g.templates, p.providers
FROM c
JOIN g USING (tenant_id, event_class, channel)
LEFT JOIN given_up_oldest u USING (tenant_id, event_class, channel)
LEFT JOIN providers p USING (tenant_id, event_class, channel)
/* include: unreconciled_oldest */;

-- name: alert_delivery_unknown
-- Outcomes that stayed unknown within the window, per event class and
-- channel, with what the page must name (R002.1: "report_delivery_unknown").
WITH u AS (
    SELECT i.tenant_id, i.event_class, i.channel, i.job_id, i.template_name,
           i.template_revision,
           coalesce(i.report_id, i.variables ->> 'report_id',
                    i.variables -> 'report' ->> 'id') AS report_id,
           coalesce(i.report_revision::text, i.variables ->> 'report_revision',
                    i.variables -> 'report' ->> 'revision') AS report_revision,
           a.provider, count(*) AS intents, min(i.terminal_at) AS first_at,
           max(i.terminal_at) AS latest_at, min(i.created_at) AS oldest_at
    FROM intents i
    LEFT JOIN attempts a
           ON a.tenant_id = i.tenant_id AND a.intent_id = i.id AND a.n = i.attempt_count
    WHERE i.state = 'unknown' AND i.terminal_at >= %(since)s
    GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9
), recipients AS (
    SELECT tenant_id, event_class, channel, count(*) AS recipients
    FROM (SELECT i.tenant_id, i.event_class, i.channel, i.recipient_ref FROM intents i
          WHERE i.state = 'unknown' AND i.terminal_at >= %(since)s
          GROUP BY 1, 2, 3, 4) AS r
    GROUP BY tenant_id, event_class, channel
)
SELECT u.tenant_id, u.event_class, u.channel, sum(u.intents)::bigint AS intents,
       r.recipients, min(u.first_at) AS first_at, max(u.latest_at) AS latest_at,
       min(u.oldest_at) AS oldest_at,
       (SELECT o.id FROM intents o
        WHERE o.event_class = u.event_class AND o.channel = u.channel
          AND o.tenant_id = u.tenant_id AND o.state = 'unknown' AND o.terminal_at >= %(since)s
        ORDER BY o.terminal_at DESC, o.id LIMIT 1) AS oldest_id,
       (array_agg(DISTINCT u.job_id::text) FILTER (WHERE u.job_id IS NOT NULL))[1:10] AS job_ids,
       (array_agg(DISTINCT u.report_id || coalesce(' rev ' || u.report_revision, ''))
            FILTER (WHERE u.report_id IS NOT NULL))[1:10] AS report_ids,
       (array_agg(DISTINCT u.template_name || coalesce(' rev ' || u.template_revision, '')))[1:10]
           AS templates,
       (array_agg(DISTINCT u.provider) FILTER (WHERE u.provider IS NOT NULL))[1:10] AS providers
FROM u JOIN recipients r USING (tenant_id, event_class, channel)
GROUP BY u.tenant_id, u.event_class, u.channel, r.recipients;

-- name: alert_due
-- Due intents per channel that no worker has claimed, read as the claim
-- reads them: lane by lane, each lane's oldest %(cap)s + 1 at most (the
-- single intents of a tenant and channel; each job's, per channel), then
-- the oldest %(cap)s + 1 of the tenant and channel kept. So a million due
-- cost what ten thousand do: counting them all ran past the round's
-- statement timeout, and the round failed whole, every other alert with
-- it, at the one moment the backlog alert mattered. `intents` and
-- `recipients` past the cap say "at least" (`intents_more`); the oldest
-- due is exact (each lane's index starts with it); `oldest_at`, the jobs,
-- templates and reports named are those of the oldest kept.
-- Intents a kill switch holds (its whole scope, as the claim reads it) are
-- held on purpose: counted apart (`held_intents`), and the alert is about
-- the rest; `kill_switch` says every due intent kept was held.
WITH RECURSIVE singles AS (
    (SELECT i.channel, i.tenant_id FROM intents i
     WHERE i.state IN ('pending', 'resend_due') AND i.job_id IS NULL
     ORDER BY i.channel, i.tenant_id LIMIT 1)
    UNION ALL
    SELECT n.channel, n.tenant_id
    FROM singles s
    CROSS JOIN LATERAL (
        SELECT i.channel, i.tenant_id FROM intents i
        WHERE i.state IN ('pending', 'resend_due') AND i.job_id IS NULL
          AND (i.channel, i.tenant_id) > (s.channel, s.tenant_id)
        ORDER BY i.channel, i.tenant_id LIMIT 1
    ) AS n
), jobs_due AS (
    (SELECT i.tenant_id, i.job_id FROM intents i
     WHERE i.state IN ('pending', 'resend_due') AND i.job_id IS NOT NULL
     ORDER BY i.tenant_id, i.job_id LIMIT 1)
    UNION ALL
    SELECT n.tenant_id, n.job_id
    FROM jobs_due j
    CROSS JOIN LATERAL (
        SELECT i.tenant_id, i.job_id FROM intents i
        WHERE i.state IN ('pending', 'resend_due') AND i.job_id IS NOT NULL
          AND (i.tenant_id, i.job_id) > (j.tenant_id, j.job_id)
        ORDER BY i.tenant_id, i.job_id LIMIT 1
    ) AS n
), lanes AS (
    SELECT f.* FROM singles s
    JOIN LATERAL (
        SELECT /* include: due_alert_columns */
        FROM intents i
        WHERE i.channel = s.channel AND i.tenant_id = s.tenant_id AND i.job_id IS NULL
          AND i.state IN ('pending', 'resend_due') AND i.next_due_at <= %(now)s
        ORDER BY i.next_due_at, i.id LIMIT %(cap)s + 1
    ) AS f ON f.tenant_id = s.tenant_id
    UNION ALL
    SELECT f.* FROM jobs_due j
    CROSS JOIN (VALUES ('email'), ('sms')) AS c (channel)
    JOIN LATERAL (
        SELECT /* include: due_alert_columns */
        FROM intents i
        WHERE i.tenant_id = j.tenant_id AND i.job_id = j.job_id AND i.channel = c.channel
          AND i.state IN ('pending', 'resend_due') AND i.next_due_at <= %(now)s
        ORDER BY i.next_due_at, i.id LIMIT %(cap)s + 1
    ) AS f ON f.tenant_id = j.tenant_id
), kept AS (
    SELECT l.*
    FROM (SELECT l.*, row_number() OVER (PARTITION BY l.tenant_id, l.channel
                                         ORDER BY l.next_due_at, l.id) AS k
          FROM lanes l) AS l
    WHERE l.k <= %(cap)s + 1
), g AS (
    SELECT k.tenant_id, k.channel, k.event_class, k.job_id, k.template_name,
           k.template_revision, k.report_id, k.purpose, k.country,
           count(*) AS intents, min(k.next_due_at) AS oldest_due_at,
           min(k.created_at) AS oldest_at
    FROM kept k
    GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9
), h AS (
    SELECT g.*, EXISTS (
               SELECT 1 FROM controls c
               WHERE c.tenant_id = g.tenant_id AND c.kind = 'kill_switch' AND c.enabled
                 AND c.channel IN ('', g.channel) AND c.country IN ('', g.country)
                 AND c.purpose IN ('', g.purpose) AND c.event_class IN ('', g.event_class)
           ) AS held
    FROM g
), d AS (
    SELECT h.*, bool_and(h.held) OVER w AS all_held,
           coalesce(sum(h.intents) FILTER (WHERE h.held) OVER w, 0) AS held_intents
    FROM h
    WINDOW w AS (PARTITION BY h.tenant_id, h.channel)
), recipients AS (
    SELECT tenant_id, channel, count(DISTINCT recipient_ref) AS recipients,
           count(*) > %(cap)s AS more
    FROM kept
    GROUP BY tenant_id, channel
), rolled AS (
    SELECT d.tenant_id, d.channel, sum(d.intents)::bigint AS intents, r.recipients,
           r.more AS intents_more,
           min(d.oldest_due_at) AS oldest_due_at, min(d.oldest_at) AS oldest_at,
           (array_agg(DISTINCT d.event_class))[1:10] AS event_classes,
           (array_agg(DISTINCT d.job_id::text) FILTER (WHERE d.job_id IS NOT NULL))[1:10]
               AS job_ids,
           (array_agg(DISTINCT d.report_id) FILTER (WHERE d.report_id IS NOT NULL))[1:10]
               AS report_ids,
           (array_agg(DISTINCT d.template_name || coalesce(' rev ' || d.template_revision, '')))
               [1:10] AS templates,
           bool_and(d.all_held) AS kill_switch, max(d.held_intents)::bigint AS held_intents
    FROM d JOIN recipients r USING (tenant_id, channel)
    WHERE NOT d.held OR d.all_held
    GROUP BY d.tenant_id, d.channel, r.recipients, r.more
)
SELECT rolled.*,
       (SELECT k.id FROM kept k
        WHERE k.channel = rolled.channel AND k.tenant_id = rolled.tenant_id
          AND (rolled.kill_switch OR NOT EXISTS (
              SELECT 1 FROM controls c
              WHERE c.tenant_id = k.tenant_id AND c.kind = 'kill_switch' AND c.enabled
                AND c.channel IN ('', k.channel) AND c.country IN ('', k.country)
                AND c.purpose IN ('', k.purpose) AND c.event_class IN ('', k.event_class)))
        ORDER BY k.next_due_at, k.id LIMIT 1) AS oldest_id
FROM rolled;

-- name: alert_impossible_transitions
-- From the kept audit (transition_audit.sql folds it first): the moves
-- still forbidden by the table as it is now, whose transition is still
-- kept, oldest first. Must stay empty, so this reads a few rows.
WITH allowed AS (
    SELECT * FROM unnest(%(froms)s::text[], %(events)s::text[], %(tos)s::text[])
        AS a (from_state, event, to_state)
)
SELECT i.tenant_id, count(*) AS n,
       (array_agg(jsonb_build_object(
            'transition_id', i.transition_id, 'intent_id', i.intent_id, 'from', i.from_state,
            'event', i.event, 'to', i.to_state, 'at', i.at) ORDER BY i.transition_id))[1:5]
           AS samples
FROM impossible_transitions i
LEFT JOIN allowed a
  ON a.from_state = coalesce(i.from_state, '') AND a.event = i.event AND a.to_state = i.to_state
WHERE a.event IS NULL
  AND EXISTS (SELECT 1 FROM transitions t
              WHERE t.tenant_id = i.tenant_id AND t.id = i.transition_id
                AND t.intent_id = i.intent_id)
GROUP BY i.tenant_id;

-- name: alert_retrying
-- Unsent intents whose last answer was a retryable provider failure and
-- that have had at least `threshold` of them (provider_deferred moves in
-- their audit), per tenant and channel. Only intents whose decision code
-- is a provider's are joined to their transitions: a large job waiting on
-- its own rate limits never is.
WITH r AS (
    SELECT i.tenant_id, i.channel, i.id, i.decision_code, i.event_class,
           count(*) AS failures
    FROM intents i
    JOIN transitions t ON t.tenant_id = i.tenant_id AND t.intent_id = i.id
                      AND t.event = 'provider_deferred'
    WHERE i.state IN ('pending', 'resend_due') AND i.decision_code = ANY(%(codes)s::text[])
    GROUP BY i.tenant_id, i.channel, i.id, i.decision_code, i.event_class
    HAVING count(*) >= %(threshold)s
)
SELECT tenant_id, channel, count(*) AS intents, max(failures) AS max_failures,
       (array_agg(id ORDER BY failures DESC, id))[1] AS worst_id,
       (array_agg(DISTINCT decision_code))[1:10] AS codes,
       (array_agg(DISTINCT event_class))[1:10] AS event_classes
FROM r GROUP BY tenant_id, channel;

-- name: alert_pending_too_long
-- Unsent intents older than their policy version allows (retry.
-- max_pending_seconds, or the default), counted from creation or
-- from not_before when that is later, per tenant and channel.
-- Read in bounded parts, whatever the backlog (issue 38): one that waited
-- longer than allowed was created at least its tenant's shortest allowed
-- wait ago, so each tenant's unsent intents are read through
-- intents_listing_state from the oldest and only up to that age, and at
-- most %(cap)s + 1 of them that are overdue, per tenant and state. An
-- unsent backlog younger than that (a job under way) costs an index probe;
-- reading every unsent intent took a second a round at 350,000 pending.
-- Past the cap the counts say "at least" (`intents_more`) and the oldest
-- is still exact (each part is read from its oldest). What such a part
-- reads beyond its overdue rows: unsent intents that old which are not
-- overdue (scheduled later by not_before, or under a longer policy).
WITH floor AS (
    SELECT tn.tenant_id,
           least(%(default_seconds)s::float8,
                 min(/* include: max_pending_seconds */)) AS shortest_seconds
    FROM tenants tn
    LEFT JOIN policies pol ON pol.tenant_id = tn.tenant_id
    GROUP BY tn.tenant_id
), p AS (
    SELECT f.tenant_id, s.state, o.*
    FROM floor f
    CROSS JOIN (VALUES ('pending'), ('resend_due')) AS s (state)
    CROSS JOIN LATERAL (
        SELECT w.channel, w.id, w.event_class, w.decision_code, w.since, w.allowed_seconds
        FROM (
            SELECT i.channel, i.id, i.event_class, i.decision_code, i.created_at,
                   greatest(i.created_at, coalesce(i.not_before, i.created_at)) AS since,
                   /* include: max_pending_seconds */ AS allowed_seconds
            FROM intents i
            LEFT JOIN policies pol
                   ON pol.tenant_id = i.tenant_id AND pol.version = i.policy_version
            WHERE i.tenant_id = f.tenant_id AND i.state = s.state
              AND i.state IN ('pending', 'resend_due')
              AND i.created_at <= %(now)s - make_interval(secs => f.shortest_seconds)
        ) AS w
        WHERE w.since + make_interval(secs => w.allowed_seconds) <= %(now)s
        ORDER BY w.created_at, w.id
        LIMIT %(cap)s + 1
    ) AS o
), capped AS (
    SELECT tenant_id FROM p GROUP BY tenant_id, state HAVING count(*) > %(cap)s
)
SELECT tenant_id, channel, count(*) AS intents, min(since) AS oldest_at,
       (array_agg(id ORDER BY since, id))[1] AS oldest_id,
       min(allowed_seconds) AS allowed_seconds,
       (array_agg(DISTINCT decision_code) FILTER (WHERE decision_code IS NOT NULL))[1:10]
           AS codes,
       (array_agg(DISTINCT event_class))[1:10] AS event_classes,
       tenant_id IN (SELECT tenant_id FROM capped) AS intents_more
FROM p
GROUP BY tenant_id, channel;

-- name: alert_provider_paused
-- Paused provider accounts, and tenants held back on one by their own
-- traffic's back-off answers, per tenant whose unsent intents last tried
-- that account: the pause or the hold keeps them back. Reached from the
-- unsent intents (few while healthy) through each one's current attempt.
-- `own_traffic`: whether this tenant's answer set the account's pause; a
-- tenant is never told which other tenant it was (the log and the metric
-- name it for operators).
SELECT i.tenant_id, a.provider AS account, i.channel,
       greatest(p.paused_until, b.held_until) AS paused_until,
       p.paused_until AS account_until, b.held_until AS tenant_held_until,
       coalesce(b.failures, p.failures) AS failures, coalesce(b.code, p.code) AS code,
       coalesce(p.caused_by = i.tenant_id, b.tenant_id IS NOT NULL) AS own_traffic,
       count(*) AS intents, (array_agg(i.id ORDER BY i.id))[1] AS sample_id
FROM intents i
JOIN attempts a ON a.tenant_id = i.tenant_id AND a.intent_id = i.id AND a.n = i.attempt_count
LEFT JOIN provider_pauses p ON p.account = a.provider AND p.paused_until > %(now)s
LEFT JOIN provider_backoffs b
       ON b.tenant_id = i.tenant_id AND b.account = a.provider AND b.held_until > %(now)s
WHERE i.state IN ('pending', 'resend_due')
  AND (p.account IS NOT NULL OR b.tenant_id IS NOT NULL)
  -- Asked first, once: with no account paused and no tenant held (the
  -- usual case) no unsent intent is read at all. Without it every
  -- pending intent of a job was joined to its attempt each round (issue 38).
  AND (EXISTS (SELECT 1 FROM provider_pauses WHERE paused_until > %(now)s)
       OR EXISTS (SELECT 1 FROM provider_backoffs WHERE held_until > %(now)s))
GROUP BY i.tenant_id, a.provider, i.channel, p.paused_until, p.failures, p.code, p.caused_by,
         b.tenant_id, b.held_until, b.failures, b.code;

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

-- name: alert_request_volume
-- The request edge's hourly volume per tenant and key (class, country and
-- prefix: domain/request_limits.py), for keys with requests this window or
-- the one before: this window's count, the previous one's, and the sum of
-- the baseline windows before it. Read through rate_counters_request_volume
-- (0036): a day of volume rows, never the claims' counters.
SELECT tenant_id, key,
       coalesce(sum(used) FILTER (WHERE window_start = %(current)s), 0)::bigint AS current,
       coalesce(sum(used) FILTER (WHERE window_start = %(previous)s), 0)::bigint AS previous,
       coalesce(sum(used) FILTER (WHERE window_start < %(previous)s), 0)::bigint
           AS baseline_total
FROM rate_counters
WHERE scope = 'request_volume' AND window_start >= %(baseline_from)s
  AND window_start <= %(current)s
GROUP BY tenant_id, key
HAVING coalesce(sum(used) FILTER (WHERE window_start >= %(previous)s), 0) > 0;

-- name: alert_provider_refused
-- Attempts a provider refused for a fault of ours (the request, the sender,
-- the account: domain/feedback.py REFUSALS) since `since`, per tenant,
-- channel, provider account and code: the count, and the newest one with
-- the provider's status and own code from its rejection's audit row (never
-- a destination or a body). Read through attempts_refused (0039): the
-- window's refusals, never the history. The code list is the index's.
WITH r AS (
    SELECT a.tenant_id, a.channel, a.provider, a.code, count(*) AS refusals,
           min(a.terminal_at) AS first_at, max(a.terminal_at) AS latest_at
    FROM attempts a
    WHERE a.state = 'failed'
      AND a.code IN ('REQUEST_INVALID', 'SENDER_REJECTED', 'ACCOUNT_RESTRICTED')
      AND a.terminal_at >= %(since)s
    GROUP BY a.tenant_id, a.channel, a.provider, a.code
)
SELECT r.tenant_id, r.channel, r.provider AS account, r.code, r.refusals, r.first_at,
       r.latest_at, s.intent_id AS sample_id, s.n AS sample_n,
       t.input ->> 'http_status' AS http_status, t.input ->> 'provider_code' AS provider_code
FROM r
CROSS JOIN LATERAL (
    SELECT a.intent_id, a.n FROM attempts a
    WHERE a.state = 'failed'
      AND a.code IN ('REQUEST_INVALID', 'SENDER_REJECTED', 'ACCOUNT_RESTRICTED')
      AND a.terminal_at >= %(since)s AND a.terminal_at <= r.latest_at
      AND a.tenant_id = r.tenant_id AND a.channel = r.channel AND a.provider = r.provider
      AND a.code = r.code
    ORDER BY a.terminal_at DESC, a.intent_id DESC, a.n DESC LIMIT 1
) AS s
LEFT JOIN LATERAL (
    SELECT t.input FROM transitions t
    WHERE t.tenant_id = r.tenant_id AND t.intent_id = s.intent_id
      AND t.event = 'provider_rejected'
    ORDER BY t.version DESC LIMIT 1
) AS t ON true;
