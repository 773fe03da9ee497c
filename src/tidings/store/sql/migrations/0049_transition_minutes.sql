-- Issue #38, item 4: the console's chart of the last hour kept, not
-- recounted. Its walk back from today's counts read every transition of
-- the tenant's last hour at each overview (about 3 million at a
-- 1,000,000-recipient job: most of the page's 1.3 s). The transition
-- audit's fold (0038, store/transition_audit.py) now also adds each batch
-- to transitions per tenant, minute and move, in the same transaction as
-- its mark; the chart reads these and, for what no fold has reached yet,
-- the transitions after the mark by the folds' own cursor.

CREATE TABLE transition_minutes (
    tenant_id   text         NOT NULL,
    minute      timestamptz  NOT NULL,
    from_state  text         NOT NULL,  -- '' for a creation
    to_state    text         NOT NULL,
    n           bigint       NOT NULL,
    PRIMARY KEY (tenant_id, minute, from_state, to_state)
);
-- The fold trims minutes the chart no longer shows.
CREATE INDEX transition_minutes_age ON transition_minutes (minute);

-- The transitions after the folds' mark, in the folds' own (txid, id)
-- order, by their cursor index alone: on a table no ANALYZE has seen, the
-- planner guesses a third of it matches and would read it all and sort.
-- STABLE: read in the calling statement's snapshot.
CREATE FUNCTION transitions_after(after_txid xid8, after_id bigint, at_most bigint)
RETURNS TABLE (tenant_id text, from_state text, to_state text, at timestamptz)
LANGUAGE sql STABLE
SET enable_seqscan = off SET enable_bitmapscan = off
AS $$
    SELECT t.tenant_id, t.from_state, t.to_state, t.at
    FROM transitions t
    WHERE (t.txid, t.id) > (after_txid, after_id)
    ORDER BY t.txid, t.id
    LIMIT at_most
$$;

-- What the folds counted before this migration, for the last two hours:
-- the mark is held so no fold moves it meanwhile.
LOCK TABLE transition_audit_mark IN EXCLUSIVE MODE;
INSERT INTO transition_minutes (tenant_id, minute, from_state, to_state, n)
SELECT t.tenant_id, date_trunc('minute', t.at), coalesce(t.from_state, ''), t.to_state, count(*)
FROM transitions t
CROSS JOIN transition_audit_mark m
WHERE t.at >= now() - interval '2 hours'
  AND ((t.txid, t.id) <= (m.folded_txid, m.folded_id)
       OR t.txid IS NULL AND (m.unaudited_after IS NULL OR t.id <= m.unaudited_after))
GROUP BY 1, 2, 3, 4;
