-- The transition audit, kept (0038; store/transition_audit.py): each fold
-- adds a batch of the transitions committed since the last one to the
-- lease recoveries per tenant, to the moves the transition table does not
-- allow and to the console chart's transitions per minute (0049), and
-- moves the mark past them. The caller holds the mark row.

-- name: transition_audit_mark
-- Skipped, not waited for, while another fold holds it: that fold counts
-- the same transitions, and the caller reads the kept counts as they are.
SELECT folded_txid::text AS folded_txid, folded_id, unaudited_after
FROM transition_audit_mark
FOR UPDATE SKIP LOCKED;

-- name: transition_audit_fold
-- The next transitions in (txid, id) order after the mark, of transactions
-- below the oldest one still running: those have all ended, so every row
-- they wrote is seen here and none commits later below the mark.
WITH allowed AS (
    SELECT * FROM unnest(%(froms)s::text[], %(events)s::text[], %(tos)s::text[])
        AS a (from_state, event, to_state)
), batch AS (
    SELECT t.tenant_id, t.id, t.intent_id, t.txid, t.from_state, t.event, t.to_state,
           t.decision_code, t.at
    FROM transitions t
    WHERE (t.txid, t.id) > (%(txid)s::xid8, %(id)s::bigint)
      AND t.txid < pg_snapshot_xmin(pg_current_snapshot())
    ORDER BY t.txid, t.id
    LIMIT %(limit)s
), recoveries AS (
    INSERT INTO transition_audit AS c (tenant_id, lease_recoveries)
    SELECT b.tenant_id, count(*) FROM batch b
    WHERE b.decision_code IN ('LEASE_EXPIRED', 'CALL_NOT_STARTED')
    GROUP BY b.tenant_id
    ORDER BY b.tenant_id
    ON CONFLICT (tenant_id) DO UPDATE
    SET lease_recoveries = c.lease_recoveries + excluded.lease_recoveries
), impossible AS (
    INSERT INTO impossible_transitions (tenant_id, transition_id, intent_id, from_state, event,
                                        to_state, at)
    SELECT b.tenant_id, b.id, b.intent_id, b.from_state, b.event, b.to_state, b.at
    FROM batch b
    LEFT JOIN allowed a
      ON a.from_state = coalesce(b.from_state, '') AND a.event = b.event
     AND a.to_state = b.to_state
    WHERE a.event IS NULL
    ON CONFLICT DO NOTHING
), /* include: fold_minutes */, last AS (
    SELECT b.txid, b.id FROM batch b ORDER BY b.txid DESC, b.id DESC LIMIT 1
)
UPDATE transition_audit_mark m SET folded_txid = last.txid, folded_id = last.id
FROM last
RETURNING (SELECT count(*) FROM batch) AS n;

-- name: transition_audit_fold_unaudited
-- The next transitions written before 0038 (no txid), by id: they all
-- committed before the migration, so an id cursor misses none of them.
WITH allowed AS (
    SELECT * FROM unnest(%(froms)s::text[], %(events)s::text[], %(tos)s::text[])
        AS a (from_state, event, to_state)
), batch AS (
    SELECT t.tenant_id, t.id, t.intent_id, t.from_state, t.event, t.to_state,
           t.decision_code, t.at
    FROM transitions t
    WHERE t.txid IS NULL AND t.id > %(after)s
    ORDER BY t.id
    LIMIT %(limit)s
), recoveries AS (
    INSERT INTO transition_audit AS c (tenant_id, lease_recoveries)
    SELECT b.tenant_id, count(*) FROM batch b
    WHERE b.decision_code IN ('LEASE_EXPIRED', 'CALL_NOT_STARTED')
    GROUP BY b.tenant_id
    ORDER BY b.tenant_id
    ON CONFLICT (tenant_id) DO UPDATE
    SET lease_recoveries = c.lease_recoveries + excluded.lease_recoveries
), impossible AS (
    INSERT INTO impossible_transitions (tenant_id, transition_id, intent_id, from_state, event,
                                        to_state, at)
    SELECT b.tenant_id, b.id, b.intent_id, b.from_state, b.event, b.to_state, b.at
    FROM batch b
    LEFT JOIN allowed a
      ON a.from_state = coalesce(b.from_state, '') AND a.event = b.event
     AND a.to_state = b.to_state
    WHERE a.event IS NULL
    ON CONFLICT DO NOTHING
), /* include: fold_minutes */, counted AS (
    SELECT count(*) AS n, max(b.id) AS last FROM batch b
)
UPDATE transition_audit_mark m
SET unaudited_after = CASE WHEN counted.n < %(limit)s THEN NULL ELSE counted.last END
FROM counted
RETURNING counted.n;

-- name: transition_minutes_trim
-- Minutes older than the chart's hour, with an hour to spare for a clock
-- behind the database's.
DELETE FROM transition_minutes WHERE minute < now() - interval '2 hours';

-- name: transition_minutes_since
-- plan: each time
-- A tenant's transitions per minute since `since` (a minute's start): the
-- folded ones kept, the rest read after the folds' mark by their own
-- cursors (rows from before 0038 by id), in one snapshot so a fold
-- committing meanwhile is counted once. `exact` is false past `limit`
-- unfolded rows (the caller recounts).
WITH mark AS MATERIALIZED (
    SELECT folded_txid, folded_id, unaudited_after FROM transition_audit_mark
), unfolded AS MATERIALIZED (
    SELECT a.tenant_id, a.from_state, a.to_state, a.at
    FROM mark m, transitions_after(m.folded_txid, m.folded_id, %(limit)s) a
    UNION ALL
    (SELECT t.tenant_id, t.from_state, t.to_state, t.at
     FROM transitions t
     WHERE t.txid IS NULL AND t.id > (SELECT m.unaudited_after FROM mark m)
     ORDER BY t.id
     LIMIT %(limit)s)
), changes AS (
    SELECT k.minute, nullif(k.from_state, '') AS from_state, k.to_state, sum(k.n)::bigint AS n
    FROM (
        SELECT minute, from_state, to_state, n FROM transition_minutes
        WHERE tenant_id = %(tenant_id)s AND minute >= %(since)s
        UNION ALL
        SELECT date_trunc('minute', u.at), coalesce(u.from_state, ''), u.to_state, 1
        FROM unfolded u
        WHERE u.tenant_id = %(tenant_id)s AND u.at >= %(since)s
    ) k
    GROUP BY 1, 2, 3
)
SELECT c.minute, c.from_state, c.to_state, c.n,
       (SELECT count(*) FROM unfolded) < %(limit)s AS exact
FROM (SELECT 1) one
LEFT JOIN changes c ON true;
