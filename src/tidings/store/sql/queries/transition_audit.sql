-- The transition audit, kept (0038; store/transition_audit.py): each fold
-- adds a batch of the transitions committed since the last one to the
-- lease recoveries per tenant and to the moves the transition table does
-- not allow, and moves the mark past them. The caller holds the mark row.

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
), last AS (
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
), counted AS (
    SELECT count(*) AS n, max(b.id) AS last FROM batch b
)
UPDATE transition_audit_mark m
SET unaudited_after = CASE WHEN counted.n < %(limit)s THEN NULL ELSE counted.last END
FROM counted
RETURNING counted.n;
