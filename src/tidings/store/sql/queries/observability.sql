-- Observability: metrics computed from rows at scrape time, the alert
-- conditions the sweeper evaluates, alert persistence, and the console's
-- reads. Every number here is derived from ledger rows (invariant 7); no
-- counter is kept on the side. State lists are written out literally where
-- a partial index has the same predicate, so the planner can use it.

-- name: metrics_intents_by_state
SELECT tenant_id, state, count(*) AS n
FROM intents
GROUP BY tenant_id, state;

-- name: metrics_intents_by_code
SELECT tenant_id, decision_code AS code, count(*) AS n,
       count(*) FILTER (WHERE state = 'suppressed') AS suppressed
FROM intents
WHERE decision_code IS NOT NULL
GROUP BY tenant_id, decision_code;

-- name: metrics_unknown
-- Outcomes that stayed unknown, by the provider account of the last attempt.
SELECT i.tenant_id, coalesce(a.provider, '') AS provider, i.event_class, i.channel,
       count(*) AS n
FROM intents i
LEFT JOIN attempts a
       ON a.tenant_id = i.tenant_id AND a.intent_id = i.id AND a.n = i.attempt_count
WHERE i.state = 'unknown'
GROUP BY 1, 2, 3, 4;

-- name: metrics_due
-- Intents a worker could claim now. Same predicate as intents_due.
SELECT tenant_id, channel, min(next_due_at) AS oldest, count(*) AS n
FROM intents
WHERE state IN ('pending', 'resend_due') AND next_due_at <= %(now)s
GROUP BY tenant_id, channel;

-- name: metrics_unreconciled
-- Sent (or being sent) with no terminal evidence yet. Same predicate as
-- intents_unreconciled. Age counts from the current attempt's call (its
-- call-started mark; the claim until the call starts), not from the
-- intent's creation: a bulk job paced by its rate limits sends its last
-- intents hours after creating them, and each is only as late as its call.
SELECT i.tenant_id, i.event_class, i.channel,
       min(coalesce(a.call_started_at, a.created_at, i.created_at)) AS oldest, count(*) AS n
FROM intents i
LEFT JOIN attempts a
       ON a.tenant_id = i.tenant_id AND a.intent_id = i.id AND a.n = i.attempt_count
WHERE i.state IN ('sending', 'accepted', 'reconciling')
GROUP BY i.tenant_id, i.event_class, i.channel;

-- name: metrics_last_reconciliation
-- The newest evidence that reconciliation works: an observation we polled,
-- looked up or received by webhook (a send's own answer does not count).
SELECT o.tenant_id, a.channel, max(o.received_at) AS at
FROM observations o
JOIN attempts a ON a.tenant_id = o.tenant_id AND a.intent_id = o.intent_id AND a.n = o.attempt_n
WHERE o.source IN ('poll', 'lookup', 'webhook')
GROUP BY o.tenant_id, a.channel;

-- name: metrics_poll_lag
-- Status checks that are due and not done. Same predicate as attempts_checks.
SELECT tenant_id, min(next_check_at) AS oldest, count(*) AS n
FROM attempts
WHERE state IN ('sending', 'accepted', 'unknown') AND next_check_at IS NOT NULL
  AND next_check_at <= %(now)s
GROUP BY tenant_id;

-- name: metrics_attempts_histogram
-- Attempts each finished intent took, as cumulative histogram buckets.
-- Each row of d meets every bucket once, so count(*) per group is the total.
WITH d AS (
    SELECT tenant_id, channel, attempt_count::float8 AS v
    FROM intents WHERE terminal_at IS NOT NULL
)
SELECT d.tenant_id, d.channel, b.le, count(*) FILTER (WHERE d.v <= b.le) AS n,
       count(*) AS count, sum(d.v) AS sum
FROM d CROSS JOIN unnest(%(bounds)s::float8[]) AS b (le)
GROUP BY d.tenant_id, d.channel, b.le
ORDER BY d.tenant_id, d.channel, b.le;

-- name: metrics_accept_to_terminal_histogram
-- From the provider's acceptance to terminal evidence, in seconds.
WITH d AS (
    SELECT tenant_id, channel, extract(epoch FROM terminal_at - accepted_at)::float8 AS v
    FROM intents WHERE accepted_at IS NOT NULL AND terminal_at IS NOT NULL
)
SELECT d.tenant_id, d.channel, b.le, count(*) FILTER (WHERE d.v <= b.le) AS n,
       count(*) AS count, sum(d.v) AS sum
FROM d CROSS JOIN unnest(%(bounds)s::float8[]) AS b (le)
GROUP BY d.tenant_id, d.channel, b.le
ORDER BY d.tenant_id, d.channel, b.le;

-- name: metrics_transition_audit
-- One pass over the audit: lease recoveries, and moves the transition
-- table does not allow (the allowed triples come from the pure table).
WITH allowed AS (
    SELECT * FROM unnest(%(froms)s::text[], %(events)s::text[], %(tos)s::text[])
        AS a (from_state, event, to_state)
)
SELECT t.tenant_id,
       count(*) FILTER (WHERE t.decision_code IN ('LEASE_EXPIRED', 'CALL_NOT_STARTED'))
           AS lease_recoveries,
       count(*) FILTER (WHERE a.event IS NULL) AS impossible
FROM transitions t
LEFT JOIN allowed a
  ON a.from_state = coalesce(t.from_state, '') AND a.event = t.event AND a.to_state = t.to_state
GROUP BY t.tenant_id;

-- name: alert_unreconciled
-- Per event class and channel: what the page must name. The report is a
-- column (jobs) or a variable. Grouped finely first (hash aggregates), then
-- rolled up, the oldest found through `intents_unreconciled`: sorting every
-- unreconciled row for DISTINCT aggregates, with to_jsonb of each, ran past
-- the scan's statement timeout in a 1M-recipient job (see alert_due).
-- Intents whose reconciliation gave up (`unknown`, within the window) are
-- still unreconciled: giving up must not clear the alert. Age counts from
-- the current attempt's call, as in metrics_unreconciled.
WITH u AS (
    SELECT i.tenant_id, i.event_class, i.channel, i.job_id, i.template_name,
           i.template_revision,
           coalesce(i.report_id, i.variables ->> 'report_id',
                    i.variables -> 'report' ->> 'id') AS report_id,
           coalesce(i.report_revision::text, i.variables ->> 'report_revision',
                    i.variables -> 'report' ->> 'revision') AS report_revision,
           a.provider, count(*) AS intents,
           count(*) FILTER (WHERE i.state = 'unknown') AS unknown,
           min(coalesce(a.call_started_at, a.created_at, i.created_at)) AS oldest_at
    FROM intents i
    LEFT JOIN attempts a
           ON a.tenant_id = i.tenant_id AND a.intent_id = i.id AND a.n = i.attempt_count
    WHERE i.state IN ('sending', 'accepted', 'reconciling')
       OR (i.state = 'unknown' AND i.terminal_at >= %(unknown_since)s)
    GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9
), recipients AS (
    SELECT tenant_id, event_class, channel, count(*) AS recipients
    FROM (SELECT i.tenant_id, i.event_class, i.channel, i.recipient_ref FROM intents i
          WHERE i.state IN ('sending', 'accepted', 'reconciling')
             OR (i.state = 'unknown' AND i.terminal_at >= %(unknown_since)s)
          GROUP BY 1, 2, 3, 4) AS r
    GROUP BY tenant_id, event_class, channel
)
SELECT u.tenant_id, u.event_class, u.channel, sum(u.intents)::bigint AS intents,
       sum(u.unknown)::bigint AS unknown,
       r.recipients, min(u.oldest_at) AS oldest_at,
       (SELECT o.id FROM intents o
        LEFT JOIN attempts oa
               ON oa.tenant_id = o.tenant_id AND oa.intent_id = o.id AND oa.n = o.attempt_count
        WHERE o.event_class = u.event_class AND o.channel = u.channel
          AND o.tenant_id = u.tenant_id
          AND (o.state IN ('sending', 'accepted', 'reconciling')
               OR (o.state = 'unknown' AND o.terminal_at >= %(unknown_since)s))
        ORDER BY coalesce(oa.call_started_at, oa.created_at, o.created_at), o.id
        LIMIT 1) AS oldest_id,
       (array_agg(DISTINCT u.job_id::text) FILTER (WHERE u.job_id IS NOT NULL))[1:10] AS job_ids,
       (array_agg(DISTINCT u.report_id || coalesce(' rev ' || u.report_revision, ''))
            FILTER (WHERE u.report_id IS NOT NULL))[1:10] AS report_ids,
       (array_agg(DISTINCT u.template_name || coalesce(' rev ' || u.template_revision, '')))[1:10]
           AS templates,
       (array_agg(DISTINCT u.provider) FILTER (WHERE u.provider IS NOT NULL))[1:10] AS providers
FROM u JOIN recipients r USING (tenant_id, event_class, channel)
GROUP BY u.tenant_id, u.event_class, u.channel, r.recipients;

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
-- Due intents per channel that no worker has claimed. Grouped finely first
-- (hash aggregates), then rolled up per channel, the oldest found through
-- the claim index: with a million due, sorting every row for the DISTINCT
-- aggregates took 5 s (13 s with to_jsonb per row), past the scan's
-- statement timeout, so a large backlog was the one never reported.
WITH d AS (
    SELECT i.tenant_id, i.channel, i.event_class, i.job_id, i.template_name,
           i.template_revision,
           coalesce(i.report_id, i.variables ->> 'report_id',
                    i.variables -> 'report' ->> 'id') AS report_id,
           count(*) AS intents, min(i.next_due_at) AS oldest_due_at,
           min(i.created_at) AS oldest_at
    FROM intents i
    WHERE i.state IN ('pending', 'resend_due') AND i.next_due_at <= %(now)s
    GROUP BY 1, 2, 3, 4, 5, 6, 7
), recipients AS (
    SELECT tenant_id, channel, count(*) AS recipients
    FROM (SELECT i.tenant_id, i.channel, i.recipient_ref FROM intents i
          WHERE i.state IN ('pending', 'resend_due') AND i.next_due_at <= %(now)s
          GROUP BY 1, 2, 3) AS r
    GROUP BY tenant_id, channel
)
SELECT d.tenant_id, d.channel, sum(d.intents)::bigint AS intents, r.recipients,
       min(d.oldest_due_at) AS oldest_due_at, min(d.oldest_at) AS oldest_at,
       (SELECT o.id FROM intents o
        WHERE o.channel = d.channel AND o.tenant_id = d.tenant_id
          AND o.state IN ('pending', 'resend_due') AND o.next_due_at <= %(now)s
        ORDER BY o.next_due_at, o.id LIMIT 1) AS oldest_id,
       (array_agg(DISTINCT d.event_class))[1:10] AS event_classes,
       (array_agg(DISTINCT d.job_id::text) FILTER (WHERE d.job_id IS NOT NULL))[1:10] AS job_ids,
       (array_agg(DISTINCT d.report_id) FILTER (WHERE d.report_id IS NOT NULL))[1:10]
           AS report_ids,
       (array_agg(DISTINCT d.template_name || coalesce(' rev ' || d.template_revision, '')))[1:10]
           AS templates,
       EXISTS (
           SELECT 1 FROM controls c
           WHERE c.tenant_id = d.tenant_id AND c.kind = 'kill_switch' AND c.enabled
             AND c.channel IN ('', d.channel)
       ) AS kill_switch
FROM d JOIN recipients r USING (tenant_id, channel)
GROUP BY d.tenant_id, d.channel, r.recipients;

-- name: alert_impossible_transitions
WITH allowed AS (
    SELECT * FROM unnest(%(froms)s::text[], %(events)s::text[], %(tos)s::text[])
        AS a (from_state, event, to_state)
)
SELECT t.tenant_id, count(*) AS n,
       (array_agg(jsonb_build_object(
            'transition_id', t.id, 'intent_id', t.intent_id, 'from', t.from_state,
            'event', t.event, 'to', t.to_state, 'at', t.at) ORDER BY t.id))[1:5] AS samples
FROM transitions t
LEFT JOIN allowed a
  ON a.from_state = coalesce(t.from_state, '') AND a.event = t.event AND a.to_state = t.to_state
WHERE a.event IS NULL
GROUP BY t.tenant_id;

-- name: alerts_lock
-- One evaluator at a time across workers; the others skip this round.
SELECT pg_try_advisory_xact_lock(%(lock)s) AS locked;

-- name: alert_round_claim
-- The periodic evaluation's turn: taken when the last one is at least an
-- interval old, and at least `spacing` times what that one took (or in the
-- future: a clock set back must not stop alerts), in the evaluation's
-- transaction, so a round that fails is counted only by alert_round_failed.
INSERT INTO alert_rounds (scope, last_at) VALUES (%(scope)s, %(now)s)
ON CONFLICT (scope) DO UPDATE SET last_at = EXCLUDED.last_at
WHERE alert_rounds.last_at <= EXCLUDED.last_at - make_interval(
          secs => greatest(%(every)s, %(spacing)s * alert_rounds.took_seconds))
   OR alert_rounds.last_at > EXCLUDED.last_at
RETURNING last_at;

-- name: alert_round_cost
UPDATE alert_rounds SET took_seconds = %(took)s WHERE scope = %(scope)s;

-- name: alert_round_failed
-- A round that failed (its scans ran past the statement timeout) still cost
-- what it took: counted, so the next waits in proportion instead of
-- failing again an interval later.
INSERT INTO alert_rounds (scope, last_at, took_seconds) VALUES (%(scope)s, %(now)s, %(took)s)
ON CONFLICT (scope) DO UPDATE SET last_at = EXCLUDED.last_at, took_seconds = EXCLUDED.took_seconds
WHERE alert_rounds.last_at <= EXCLUDED.last_at - make_interval(secs => %(every)s)
   OR alert_rounds.last_at > EXCLUDED.last_at;

-- name: alerts_open_all
SELECT * FROM alerts WHERE resolved_at IS NULL ORDER BY tenant_id, opened_at;

-- name: alert_open
INSERT INTO alerts (tenant_id, id, key, condition, severity, summary, details, opened_at,
                    updated_at)
VALUES (%(tenant_id)s, %(id)s, %(key)s, %(condition)s, %(severity)s, %(summary)s,
        %(details)s, %(now)s, %(now)s)
ON CONFLICT (tenant_id, key) WHERE resolved_at IS NULL DO NOTHING
RETURNING *;

-- name: alert_update
UPDATE alerts SET severity = %(severity)s, summary = %(summary)s, details = %(details)s,
                  updated_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND id = %(id)s AND resolved_at IS NULL
RETURNING *;

-- name: alert_resolve
UPDATE alerts SET resolved_at = %(now)s, updated_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND id = %(id)s AND resolved_at IS NULL
RETURNING *;

-- name: alerts_claim_notifications
-- Announcements owed: an opening (or escalation to page) not yet sent, or
-- a resolution not yet sent (recent ones only: turning a webhook on must
-- not replay last year). Claimed by pushing notify_after forward, so the
-- HTTP call happens outside any transaction and no other worker sends it.
UPDATE alerts SET notify_after = %(lease_until)s
WHERE (tenant_id, id) IN (
    SELECT tenant_id, id FROM alerts
    WHERE (notify_after IS NULL OR notify_after <= %(now)s)
      AND ((resolved_at IS NULL
            AND (notified_severity IS NULL
                 OR (severity = 'page' AND notified_severity = 'warning')))
           OR (resolved_at IS NOT NULL AND resolved_notified_at IS NULL
               AND resolved_at >= %(resolved_since)s))
    ORDER BY updated_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED)
RETURNING *;

-- name: alert_notified
UPDATE alerts SET
    notified_severity = CASE WHEN %(announced)s = 'resolved' THEN notified_severity
                             ELSE %(severity)s END,
    resolved_notified_at = CASE WHEN %(announced)s = 'resolved' THEN %(now)s
                                ELSE resolved_notified_at END,
    notify_failures = 0,
    notify_after = NULL
WHERE tenant_id = %(tenant_id)s AND id = %(id)s;

-- name: alert_notify_failed
UPDATE alerts SET notify_failures = notify_failures + 1, notify_after = %(retry_at)s
WHERE tenant_id = %(tenant_id)s AND id = %(id)s;

-- name: console_alerts
SELECT * FROM alerts
WHERE tenant_id = %(tenant_id)s AND (resolved_at IS NULL OR resolved_at >= %(since)s)
ORDER BY resolved_at IS NULL DESC, severity = 'page' DESC, opened_at DESC
LIMIT 50;

-- name: console_counts
SELECT state, count(*) AS n FROM intents WHERE tenant_id = %(tenant_id)s GROUP BY state;

-- name: console_codes
SELECT decision_code AS code, state, count(*) AS n FROM intents
WHERE tenant_id = %(tenant_id)s AND decision_code IS NOT NULL
GROUP BY decision_code, state ORDER BY n DESC, code;

-- name: console_oldest
-- The oldest nonterminal intents: where an operator starts reading.
SELECT id, event_class, channel, state, created_at, accepted_at, last_status_at, next_due_at,
       job_id, template_name, template_revision
FROM intents
WHERE tenant_id = %(tenant_id)s
  AND state IN ('pending', 'sending', 'accepted', 'resend_due', 'reconciling')
ORDER BY created_at, id
LIMIT %(limit)s;

-- name: console_state_changes
-- The last hour of transitions per minute, for walking today's counts back
-- in time (a creation has no from_state: the intent did not exist before).
SELECT date_trunc('minute', at) AS minute, from_state, to_state, count(*) AS n
FROM transitions
WHERE tenant_id = %(tenant_id)s AND at >= %(since)s
GROUP BY 1, 2, 3;

-- name: console_jobs_table
SELECT to_regclass('jobs') IS NOT NULL AS present;

-- name: console_jobs
SELECT to_jsonb(j) AS job FROM jobs j
WHERE j.tenant_id = %(tenant_id)s
ORDER BY j.created_at DESC
LIMIT %(limit)s;

-- name: console_job_counts
SELECT job_id, state, count(*) AS n FROM intents
WHERE tenant_id = %(tenant_id)s AND job_id = ANY(%(job_ids)s)
GROUP BY job_id, state;

-- name: console_event_classes
SELECT event_class, channel, state, count(*) AS n, min(created_at) AS first_at,
       max(updated_at) AS last_at
FROM intents WHERE tenant_id = %(tenant_id)s
GROUP BY event_class, channel, state;

-- name: console_last_observation
SELECT o.received_at, o.occurred_at, o.status, o.source, o.provider, o.attempt_n, o.raw_status
FROM observations o
WHERE o.tenant_id = %(tenant_id)s AND o.intent_id = %(id)s
ORDER BY o.id DESC
LIMIT 1;

-- name: console_cancellation
SELECT at, actor FROM transitions
WHERE tenant_id = %(tenant_id)s AND intent_id = %(id)s AND to_state = 'canceled'
ORDER BY version DESC
LIMIT 1;

-- name: metrics_statement_timeout
-- A scrape or an alert round must not hold a connection for long when the
-- tables are large or locked: give up and report the ledger as unreadable.
SELECT set_config('statement_timeout', %(ms)s, true);

-- name: console_due
-- Per channel and lane (docs/concepts/lanes.md): urgent, of no job; bulk, a job's.
SELECT channel, CASE WHEN job_id IS NULL THEN 'urgent' ELSE 'bulk' END AS lane,
       min(next_due_at) AS oldest, count(*) AS n
FROM intents
WHERE tenant_id = %(tenant_id)s AND state IN ('pending', 'resend_due')
  AND next_due_at <= %(now)s
GROUP BY 1, 2
ORDER BY 1, 2 DESC;

-- name: console_unreconciled
-- Age from the current attempt's call, as in metrics_unreconciled.
SELECT i.event_class, i.channel,
       min(coalesce(a.call_started_at, a.created_at, i.created_at)) AS oldest, count(*) AS n,
       count(DISTINCT i.recipient_ref) AS recipients
FROM intents i
LEFT JOIN attempts a
       ON a.tenant_id = i.tenant_id AND a.intent_id = i.id AND a.n = i.attempt_count
WHERE i.tenant_id = %(tenant_id)s AND i.state IN ('sending', 'accepted', 'reconciling')
GROUP BY i.event_class, i.channel
ORDER BY oldest;

-- name: console_last_reconciliation
SELECT a.channel, max(o.received_at) AS at
FROM observations o
JOIN attempts a ON a.tenant_id = o.tenant_id AND a.intent_id = o.intent_id AND a.n = o.attempt_n
WHERE o.tenant_id = %(tenant_id)s AND o.source IN ('poll', 'lookup', 'webhook')
GROUP BY a.channel;

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
WITH p AS (
    SELECT i.tenant_id, i.channel, i.id, i.event_class, i.decision_code,
           greatest(i.created_at, coalesce(i.not_before, i.created_at)) AS since,
           -- Total over any stored document (issue #39): a number within
           -- the limit (1..31622400, domain/policy_bounds.py) or the
           -- default. A cast or interval that fails on one tenant's
           -- document would stop every tenant's alerts.
           CASE WHEN jsonb_typeof(pol.document #> '{retry,max_pending_seconds}') = 'number'
                THEN least(greatest((pol.document #>> '{retry,max_pending_seconds}')::numeric,
                                    1), 31622400)::float8
                ELSE %(default_seconds)s END AS allowed_seconds
    FROM intents i
    LEFT JOIN policies pol ON pol.tenant_id = i.tenant_id AND pol.version = i.policy_version
    WHERE i.state IN ('pending', 'resend_due')
)
SELECT tenant_id, channel, count(*) AS intents, min(since) AS oldest_at,
       (array_agg(id ORDER BY since, id))[1] AS oldest_id,
       min(allowed_seconds) AS allowed_seconds,
       (array_agg(DISTINCT decision_code) FILTER (WHERE decision_code IS NOT NULL))[1:10]
           AS codes,
       (array_agg(DISTINCT event_class))[1:10] AS event_classes
FROM p
WHERE since + make_interval(secs => allowed_seconds) <= %(now)s
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
GROUP BY i.tenant_id, a.provider, i.channel, p.paused_until, p.failures, p.code, p.caused_by,
         b.tenant_id, b.held_until, b.failures, b.code;
