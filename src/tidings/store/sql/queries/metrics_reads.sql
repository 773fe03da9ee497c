-- Ledger metrics computed from rows at scrape time (store/metrics_reads.py).
-- Every number here is derived from ledger rows (invariant 7): read from
-- them, or from intent_counts, a projection the triggers of 0043 keep in the
-- ledger's own transactions and a test recounts. State lists are written out literally where a partial
-- index has the same predicate, so the planner can use it.

-- name: metrics_intents_by_state
-- Kept counts (migrations/0043_intent_counts.sql), not a scan of the ledger.
SELECT tenant_id, state, sum(n)::bigint AS n
FROM intent_counts
GROUP BY tenant_id, state HAVING sum(n) <> 0;

-- name: metrics_intents_by_code
SELECT tenant_id, code, sum(n)::bigint AS n,
       coalesce(sum(n) FILTER (WHERE state = 'suppressed'), 0)::bigint AS suppressed
FROM intent_counts
WHERE code <> ''
GROUP BY tenant_id, code HAVING sum(n) <> 0;

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
-- Sent (or being sent) with no terminal evidence yet: the number exact from
-- the kept counts (0043), the oldest from intents_unreconciled (0047), a
-- few index entries per tenant, event class and channel, whatever the
-- backlog. Age counts from the current attempt's call (its call-started
-- mark; the claim until the call starts), not from the intent's creation:
-- a bulk job paced by its rate limits sends its last intents hours after
-- creating them, and each is only as late as its call.
WITH c AS (
    SELECT tenant_id, event_class, channel, sum(n)::bigint AS n
    FROM intent_counts
    WHERE state IN ('sending', 'accepted', 'reconciling')
    GROUP BY tenant_id, event_class, channel
    HAVING sum(n) > 0
)
SELECT c.tenant_id, c.event_class, c.channel, o.oldest_at AS oldest, c.n
FROM c
/* include: unreconciled_oldest */;

-- name: metrics_last_reconciliation
-- The newest evidence that reconciliation works: an observation we polled,
-- looked up or received by webhook (a send's own answer does not count).
-- The (tenant, channel) pairs are walked in observations_reconciled one
-- probe each (a loose index scan), and each pair's newest is that index's
-- end: a few pages per pair and month partition, never the receipts.
WITH RECURSIVE pairs AS (
    (SELECT o.tenant_id, o.channel FROM observations o
     WHERE o.source IN ('poll', 'lookup', 'webhook') AND o.channel IS NOT NULL
     ORDER BY o.tenant_id, o.channel LIMIT 1)
    UNION ALL
    SELECT n.tenant_id, n.channel
    FROM pairs p
    CROSS JOIN LATERAL (
        SELECT o.tenant_id, o.channel FROM observations o
        WHERE o.source IN ('poll', 'lookup', 'webhook') AND o.channel IS NOT NULL
          AND (o.tenant_id, o.channel) > (p.tenant_id, p.channel)
        ORDER BY o.tenant_id, o.channel LIMIT 1
    ) AS n
)
SELECT p.tenant_id, p.channel,
       (SELECT max(o.received_at) FROM observations o
        WHERE o.tenant_id = p.tenant_id AND o.channel = p.channel
          AND o.source IN ('poll', 'lookup', 'webhook')) AS at
FROM pairs p;

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
-- The kept audit (transition_audit.sql folds it first): lease recoveries
-- since ever, and the moves the transition table does not allow (the
-- allowed triples come from the pure table), as alert_impossible_transitions
-- counts them.
WITH allowed AS (
    SELECT * FROM unnest(%(froms)s::text[], %(events)s::text[], %(tos)s::text[])
        AS a (from_state, event, to_state)
), impossible AS (
    SELECT i.tenant_id, count(*) AS n
    FROM impossible_transitions i
    LEFT JOIN allowed a
      ON a.from_state = coalesce(i.from_state, '') AND a.event = i.event
     AND a.to_state = i.to_state
    WHERE a.event IS NULL
      AND EXISTS (SELECT 1 FROM transitions t
                  WHERE t.tenant_id = i.tenant_id AND t.id = i.transition_id
                    AND t.intent_id = i.intent_id)
    GROUP BY i.tenant_id
)
SELECT coalesce(c.tenant_id, i.tenant_id) AS tenant_id,
       coalesce(c.lease_recoveries, 0) AS lease_recoveries, coalesce(i.n, 0) AS impossible
FROM transition_audit c
FULL JOIN impossible i ON i.tenant_id = c.tenant_id;

-- name: metrics_statement_timeout
-- A scrape or an alert round must not hold a connection for long when the
-- tables are large or locked: give up and report the ledger as unreadable.
-- And no JIT: their reads stop at caps of rows that the planner prices as
-- if they were read whole, and compiling them took about 1 s of a 1.3 s
-- unreconciled alert read with 100,000 in flight (docs/benchmarks.md).
SELECT set_config('statement_timeout', %(ms)s, true), set_config('jit', 'off', true);

-- name: metrics_quarantined
-- Quarantined intents per tenant and code, from rows (invariant 7).
SELECT tenant_id, decision_code AS code, count(*) AS n FROM intents
WHERE decision_code IN ('UNDECODABLE', 'UNRENDERABLE')
GROUP BY tenant_id, decision_code;
