-- The console's reads: what one tenant's operator pages show, read from
-- rows (store/console_reads.py). No destination, token or body is read.

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
-- The tenant's channels walked in observations_reconciled one probe each,
-- and each one's newest read at its end (as metrics_last_reconciliation).
WITH RECURSIVE channels AS (
    (SELECT o.channel FROM observations o
     WHERE o.tenant_id = %(tenant_id)s AND o.source IN ('poll', 'lookup', 'webhook')
       AND o.channel IS NOT NULL
     ORDER BY o.channel LIMIT 1)
    UNION ALL
    SELECT n.channel
    FROM channels c
    CROSS JOIN LATERAL (
        SELECT o.channel FROM observations o
        WHERE o.tenant_id = %(tenant_id)s AND o.source IN ('poll', 'lookup', 'webhook')
          AND o.channel > c.channel
        ORDER BY o.channel LIMIT 1
    ) AS n
)
SELECT c.channel,
       (SELECT max(o.received_at) FROM observations o
        WHERE o.tenant_id = %(tenant_id)s AND o.channel = c.channel
          AND o.source IN ('poll', 'lookup', 'webhook')) AS at
FROM channels c;

-- name: console_spend_used
-- What the tenant's country spend breakers have spent in their current
-- windows: one counter row per (key, window) by the primary key.
SELECT c.key, c.window_start, c.used
FROM unnest(%(keys)s::text[], %(windows)s::timestamptz[]) AS w (key, window_start)
JOIN rate_counters c
  ON c.tenant_id = %(tenant_id)s AND c.scope = 'country_spend'
 AND c.key = w.key AND c.window_start = w.window_start;
