-- name: lanes_due
-- Each lane's queue (docs/concepts/lanes.md): due intents per tenant,
-- channel and lane (urgent: of no job; bulk: of a job), the oldest due,
-- and the oldest due retry (an intent that has been tried before).
SELECT tenant_id, channel,
       CASE WHEN job_id IS NULL THEN 'urgent' ELSE 'bulk' END AS lane,
       count(*) AS n, min(next_due_at) AS oldest,
       min(next_due_at) FILTER (WHERE attempt_count > 0) AS oldest_retry
FROM intents
WHERE state IN ('pending', 'resend_due') AND next_due_at <= %(now)s
GROUP BY 1, 2, 3;

-- name: lanes_urgent_backlog
-- Single intents due and unclaimed, per tenant and channel, through the
-- urgent lane's own index: the claim takes them before any job's, so one
-- waiting long means workers are missing, held or saturated by singles.
-- Intents a kill switch holds (its whole scope: channel, country, purpose,
-- event class, as the claim reads it) are held on purpose and not counted;
-- `kill_switch` says every one was. Grouped by the scope's fields first, so
-- the controls are read once a group, not once an intent.
WITH g AS (
    SELECT i.tenant_id, i.channel, i.event_class, i.purpose, coalesce(i.country, '') AS country,
           count(*) AS intents, min(i.next_due_at) AS oldest_due_at
    FROM intents i
    WHERE i.state IN ('pending', 'resend_due') AND i.job_id IS NULL
      AND i.next_due_at <= %(now)s
    GROUP BY 1, 2, 3, 4, 5
), h AS (
    SELECT g.*, EXISTS (
               SELECT 1 FROM controls c
               WHERE c.tenant_id = g.tenant_id AND c.kind = 'kill_switch' AND c.enabled
                 AND c.channel IN ('', g.channel) AND c.country IN ('', g.country)
                 AND c.purpose IN ('', g.purpose) AND c.event_class IN ('', g.event_class)
           ) AS held
    FROM g
)
SELECT h.tenant_id, h.channel,
       coalesce(sum(h.intents) FILTER (WHERE NOT h.held), sum(h.intents))::bigint AS intents,
       coalesce(min(h.oldest_due_at) FILTER (WHERE NOT h.held), min(h.oldest_due_at))
           AS oldest_due_at,
       coalesce((array_agg(DISTINCT h.event_class) FILTER (WHERE NOT h.held))[1:10],
                (array_agg(DISTINCT h.event_class))[1:10]) AS event_classes,
       bool_and(h.held) AS kill_switch
FROM h
GROUP BY h.tenant_id, h.channel;

-- name: lanes_expired_unsent
-- Intents that reached their deadline (a token's life, an offer's) with no
-- call made: seed 003's "tokens expired" signal.
SELECT tenant_id, event_class, count(*) AS n
FROM intents
WHERE state = 'expired' AND attempt_count = 0
GROUP BY 1, 2;

-- name: lanes_suppression_lists
-- What stops sends to a destination, by reason: suppressions (bounces,
-- complaints, an operator's) and opt-outs (STOP, unsubscribes).
SELECT tenant_id, channel, reason, count(*) AS n
FROM suppressions GROUP BY 1, 2, 3
UNION ALL
SELECT tenant_id, channel, 'opt_out', count(*)
FROM opt_outs GROUP BY 1, 2;
