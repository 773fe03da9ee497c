-- Issue #38, reads at scale: the newest reconciliation evidence per tenant
-- and channel (the metric tidings_last_successful_reconciliation_timestamp_seconds,
-- the alerts' "last successful reconciliation", the console's) is read from
-- an index instead of joining every receipt to its attempt for a max().
-- An observation names its attempt's channel, written with it
-- (store/sql/queries/observations.sql); the column is added without a
-- default, so no partition is rewritten.
ALTER TABLE observations ADD COLUMN channel text;

-- Older rows keep no channel, except the newest reconciliation observation
-- of each tenant and channel: the only row a max() per channel needs, so
-- the answer is the same from the first read on, and the migration writes
-- a few rows, not the table.
UPDATE observations o SET channel = newest.channel
FROM (
    SELECT DISTINCT ON (o.tenant_id, a.channel) o.tenant_id, o.intent_id, o.id, a.channel
    FROM observations o
    JOIN attempts a ON a.tenant_id = o.tenant_id AND a.intent_id = o.intent_id
                   AND a.n = o.attempt_n
    WHERE o.source IN ('poll', 'lookup', 'webhook')
    ORDER BY o.tenant_id, a.channel, o.received_at DESC
) AS newest
WHERE o.tenant_id = newest.tenant_id AND o.intent_id = newest.intent_id AND o.id = newest.id;

-- Walked once per distinct (tenant, channel), then read at its end: a few
-- index pages per month partition, whatever the number of receipts.
CREATE INDEX observations_reconciled ON observations (tenant_id, channel, received_at)
    WHERE source IN ('poll', 'lookup', 'webhook') AND channel IS NOT NULL;
