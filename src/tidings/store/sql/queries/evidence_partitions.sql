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
