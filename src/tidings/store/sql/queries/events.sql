-- name: events_after
-- The next page of a tenant's events after the cursor (txid, id). Only rows
-- whose transaction is older than every transaction still running are
-- returned: ids are handed out before commit, so an id-ordered reader could
-- pass over a row that commits later; a txid below the snapshot's xmin can
-- no longer gain rows, so the cursor never skips an event that commits late.
SELECT id, txid::text AS txid, type, intent_id, job_id, payload, created_at
FROM events
WHERE tenant_id = %(tenant_id)s
  AND (txid, id) > (%(txid)s::xid8, %(id)s::bigint)
  AND txid < pg_snapshot_xmin(pg_current_snapshot())
-- Ordered by the columns, not by the text `txid` of the select list (which
-- ORDER BY would name first): as text, '10' sorts before '9', and no index
-- gives that order, so every event of the tenant was read and sorted.
ORDER BY events.txid, events.id
LIMIT %(limit)s;
