-- Months of evidence partitions (0026, store/evidence_partitions.py): the
-- registry, the DDL (through the migration's functions), and what keeps a
-- month from being dropped whole (docs/retention.md).

-- name: evidence_months
SELECT month, lower_id, upper_id, created_at, attempts_dropped_at, observations_dropped_at
FROM evidence_months ORDER BY month;

-- name: evidence_months_lock
-- One process makes or drops partitions at a time; the others skip the turn.
SELECT pg_try_advisory_xact_lock(%(key)s) AS locked;

-- name: evidence_months_lock_timeout
-- Partition DDL waits for every statement on the parent table to finish and
-- holds up the ones behind it meanwhile: it gives up quickly and tries again
-- later rather than stall dispatch.
SELECT set_config('lock_timeout', %(ms)s, true);

-- name: evidence_month_create
SELECT evidence_month_create(%(month)s, %(lower)s, %(upper)s, %(now)s) AS created;

-- name: evidence_month_drop
SELECT evidence_month_drop(%(parent)s, %(month)s, %(keep)s::uuid[]) AS kept;

-- name: evidence_month_attempts_dropped
UPDATE evidence_months SET attempts_dropped_at = %(now)s
WHERE month = %(month)s AND attempts_dropped_at IS NULL;

-- name: evidence_month_observations_dropped
UPDATE evidence_months SET observations_dropped_at = %(now)s
WHERE month = %(month)s AND observations_dropped_at IS NULL;

-- name: evidence_default_oldest
-- The oldest intent the default partitions hold evidence of within a range
-- (ids made by this engine, not a stray one from another era): where the
-- first months begin on an install that had evidence before 0026. Every
-- intent's creation is audited, so its transitions name it.
SELECT intent_id AS oldest FROM transitions_default
WHERE intent_id >= %(low)s AND intent_id < %(high)s
ORDER BY intent_id LIMIT 1;

-- name: month_attempt_evidence_kept
-- Intents of the month whose attempts, transitions or events must stay (at
-- most `most` of them): not final yet, ended within their policy's attempt
-- clock, or a job's intents whose job has no final counts yet (its cost is
-- read from them). Each tenant's intents of the month are one range of its
-- primary key.
WITH clocks AS (
    SELECT * FROM jsonb_to_recordset(%(clocks)s::jsonb)
         AS c (tenant_id text, policy_version text, days int)
)
SELECT k.id
FROM tenants t
CROSS JOIN LATERAL (
    SELECT i.id FROM intents i
    LEFT JOIN clocks c ON c.tenant_id = i.tenant_id AND c.policy_version = i.policy_version
    WHERE i.tenant_id = t.tenant_id AND i.id >= %(low)s AND i.id < %(high)s
      AND i.attempts_purged_at IS NULL
      AND (i.terminal_at IS NULL
           OR i.terminal_at >= %(now)s - make_interval(days => coalesce(c.days, %(default_days)s))
           OR (i.job_id IS NOT NULL AND NOT EXISTS (
                   SELECT 1 FROM jobs j WHERE j.tenant_id = i.tenant_id AND j.id = i.job_id
                     AND j.final_counts IS NOT NULL)))
    LIMIT %(most)s
) k
LIMIT %(most)s;

-- name: month_observations_kept
-- Intents of the month whose receipts must stay (at most `most` of them,
-- an intent possibly twice): not final yet, or with a receipt that arrived
-- within its policy's observation clock.
WITH clocks AS (
    SELECT * FROM jsonb_to_recordset(%(clocks)s::jsonb)
         AS c (tenant_id text, policy_version text, days int)
)
(SELECT k.id
 FROM tenants t
 CROSS JOIN LATERAL (
     SELECT i.id FROM intents i
     WHERE i.tenant_id = t.tenant_id AND i.id >= %(low)s AND i.id < %(high)s
       AND i.terminal_at IS NULL
     LIMIT %(most)s) k
 LIMIT %(most)s)
UNION ALL
(SELECT o.intent_id
 FROM observations o
 JOIN intents i ON i.tenant_id = o.tenant_id AND i.id = o.intent_id
 LEFT JOIN clocks c ON c.tenant_id = i.tenant_id AND c.policy_version = i.policy_version
 WHERE o.intent_id >= %(low)s AND o.intent_id < %(high)s
   -- no clock is longer: most of a due month is ruled out unjoined
   AND o.received_at >= %(now)s - make_interval(days => %(longest_days)s)
   AND o.received_at >= %(now)s - make_interval(days => coalesce(c.days, %(default_days)s))
 LIMIT %(most)s);
