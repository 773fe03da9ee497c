-- Issue #38, reads at scale: the transition audit (lease recoveries, moves
-- the transition table forbids) is kept, not recounted over every
-- transition at each metrics scrape and alert round. store/transition_audit.py
-- folds the transitions committed since its last fold into two small
-- tables, and the scrape and the round read those (docs/operations.md,
-- "The transition audit").

-- Each transition names the transaction that wrote it, so a fold reads
-- only what committed since the last one: ids are handed out before
-- commit and a transaction that commits late would slip under an id
-- cursor; below pg_snapshot_xmin every transaction has ended (as events,
-- 0001). Added without a default, then given one, so no partition is
-- rewritten: rows older than this keep NULL and are folded once, by id
-- (they all committed before this migration took its lock).
ALTER TABLE transitions ADD COLUMN txid xid8;
ALTER TABLE transitions ALTER COLUMN txid SET DEFAULT pg_current_xact_id();
CREATE INDEX transitions_audit_cursor ON transitions (txid, id);
CREATE INDEX transitions_unaudited ON transitions (id) WHERE txid IS NULL;

-- Lease recoveries per tenant since ever: a counter, as its metric is;
-- a retention purge does not take any back (as job_counts, 0033).
CREATE TABLE transition_audit (
    tenant_id         text    NOT NULL,
    lease_recoveries  bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id)
);

-- Each audited move the transition table did not allow when it was
-- folded, a copy of its transition's row. Read only while that transition
-- is still kept, so a purge ends its page as it did when the audit was
-- recounted.
CREATE TABLE impossible_transitions (
    tenant_id      text         NOT NULL,
    transition_id  bigint       NOT NULL,
    intent_id      uuid         NOT NULL,
    from_state     text,
    event          text         NOT NULL,
    to_state       text         NOT NULL,
    at             timestamptz  NOT NULL,
    PRIMARY KEY (tenant_id, transition_id, intent_id)
);

-- How far the folds went: every transition up to (folded_txid, folded_id)
-- in (txid, id) order is counted; the older rows without a txid up to id
-- unaudited_after, all of them once it is NULL. One row.
CREATE TABLE transition_audit_mark (
    only_row         boolean  NOT NULL DEFAULT true CHECK (only_row),
    folded_txid      xid8     NOT NULL DEFAULT '0',
    folded_id        bigint   NOT NULL DEFAULT 0,
    unaudited_after  bigint   DEFAULT 0,
    PRIMARY KEY (only_row)
);
INSERT INTO transition_audit_mark DEFAULT VALUES;
