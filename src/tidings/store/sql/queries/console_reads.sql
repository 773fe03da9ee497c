-- The console's reads: what one tenant's operator pages show, read from
-- rows (store/console_reads.py). No destination, token or body is read.

-- name: console_alerts
SELECT * FROM alerts
WHERE tenant_id = %(tenant_id)s AND (resolved_at IS NULL OR resolved_at >= %(since)s)
ORDER BY resolved_at IS NULL DESC, severity = 'page' DESC, opened_at DESC
LIMIT 50;

-- name: console_counts
-- Kept counts (migrations/0043_intent_counts.sql): a few rows per state.
SELECT state, sum(n)::bigint AS n FROM intent_counts WHERE tenant_id = %(tenant_id)s
GROUP BY state HAVING sum(n) <> 0;

-- name: console_codes
SELECT code, state, sum(n)::bigint AS n FROM intent_counts
WHERE tenant_id = %(tenant_id)s AND code <> ''
GROUP BY code, state HAVING sum(n) <> 0 ORDER BY n DESC, code;

-- name: console_oldest
-- The oldest nonterminal intents: where an operator starts reading. The
-- oldest of each open state, each read from the front of
-- intents_listing_state (0034; 0048 dropped the open-only time index),
-- then the oldest of those: five short index walks, never the tenant's
-- open backlog sorted. The IN list is repeated inside so the planner can
-- see the partial index's predicate hold for `state = s.state`.
SELECT o.* FROM unnest(ARRAY['pending', 'sending', 'accepted', 'resend_due', 'reconciling'])
    AS s (state)
CROSS JOIN LATERAL (
    SELECT id, event_class, channel, state, created_at, accepted_at, last_status_at,
           next_due_at, job_id, template_name, template_revision
    FROM intents
    WHERE tenant_id = %(tenant_id)s AND state = s.state
      AND state IN ('pending', 'sending', 'accepted', 'resend_due', 'reconciling')
    ORDER BY created_at, id
    LIMIT %(limit)s
) o
ORDER BY o.created_at, o.id
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
-- last_at: the last time an intent of the class and channel changed state.
SELECT event_class, channel, state, sum(n)::bigint AS n, max(updated_at) AS last_at
FROM intent_counts WHERE tenant_id = %(tenant_id)s
GROUP BY event_class, channel, state HAVING sum(n) <> 0;

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
-- Per channel and lane (docs/concepts/lanes.md): urgent, of no job; bulk, a
-- job's. The oldest is exact (an index's first entry); the count stops at
-- %(cap)s + 1, so a million due cost what ten thousand do and the page says
-- "more than". A job's lane is found by walking its due index one job at a
-- time: the cost follows the jobs with something due, not their size.
WITH RECURSIVE due_jobs AS (
    (SELECT i.job_id FROM intents i
     WHERE i.tenant_id = %(tenant_id)s AND i.job_id IS NOT NULL
       AND i.state IN ('pending', 'resend_due')
     ORDER BY i.job_id LIMIT 1)
    UNION ALL
    SELECT n.job_id
    FROM due_jobs d
    CROSS JOIN LATERAL (
        SELECT i.job_id FROM intents i
        WHERE i.tenant_id = %(tenant_id)s AND i.job_id > d.job_id
          AND i.state IN ('pending', 'resend_due')
        ORDER BY i.job_id LIMIT 1
    ) AS n
),
lanes AS (
    SELECT c.channel, 'urgent' AS lane, s.oldest, s.n
    FROM (VALUES ('email'), ('sms')) AS c (channel)
    CROSS JOIN LATERAL (
        SELECT min(f.next_due_at) AS oldest, count(*) AS n
        FROM (SELECT i.next_due_at FROM intents i
              WHERE i.channel = c.channel AND i.tenant_id = %(tenant_id)s
                AND i.state IN ('pending', 'resend_due') AND i.job_id IS NULL
                AND i.next_due_at <= %(now)s
              ORDER BY i.next_due_at LIMIT %(cap)s + 1) AS f
    ) AS s
    UNION ALL
    SELECT c.channel, 'bulk', s.oldest, s.n
    FROM due_jobs d
    CROSS JOIN (VALUES ('email'), ('sms')) AS c (channel)
    CROSS JOIN LATERAL (
        SELECT min(f.next_due_at) AS oldest, count(*) AS n
        FROM (SELECT i.next_due_at FROM intents i
              WHERE i.tenant_id = %(tenant_id)s AND i.job_id = d.job_id
                AND i.channel = c.channel AND i.state IN ('pending', 'resend_due')
                AND i.next_due_at <= %(now)s
              ORDER BY i.next_due_at LIMIT %(cap)s + 1) AS f
    ) AS s
)
SELECT channel, lane, min(oldest) AS oldest, least(sum(n), %(cap)s + 1)::bigint AS n
FROM lanes
WHERE n > 0
GROUP BY 1, 2
ORDER BY 1, 2 DESC;

-- name: console_unreconciled
-- Per event class and channel: how many are in flight, exact, from the
-- kept counts (0043), and the oldest call among them, exact, from the
-- first entries of intents_unreconciled (0047): a few rows per row of the
-- table, however many wait for their receipts (docs/console.md).
WITH c AS (
    SELECT tenant_id, event_class, channel, sum(n)::bigint AS n
    FROM intent_counts
    WHERE tenant_id = %(tenant_id)s AND state IN ('sending', 'accepted', 'reconciling')
    GROUP BY tenant_id, event_class, channel
    HAVING sum(n) > 0
)
SELECT c.event_class, c.channel, c.n, o.oldest_at AS oldest
FROM c
/* include: unreconciled_oldest */
ORDER BY o.oldest_at, c.event_class, c.channel;

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

-- name: console_without_jit
-- For the rest of the page's transaction: its reads stop at caps of rows
-- that the planner prices as if read whole, and JIT compiling such a read
-- costs far more than running it (metrics_statement_timeout, docs/benchmarks.md).
SELECT set_config('jit', 'off', true);
