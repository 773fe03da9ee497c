-- A tenant's intents by event class, channel, state and decision code, kept
-- rather than recounted (issue 38, item 4; docs/console.md): triggers on
-- intents add each statement's changes in the same transaction, so the
-- console's overview, its jobs page and a metrics scrape read a few rows per
-- key, not every intent the tenant ever had. Deleted intents (retention) are
-- taken away: these are the intents that exist, not what a job did
-- (job_counts keeps that).
--
-- A transaction writes its own stripe, one no running transaction holds
-- (counts_stripe), so writers never wait on or lock each other's rows: no
-- queue on a hot row, and no deadlock between two transactions that touch
-- the same keys in different orders across statements. Only sums over a
-- key's stripes mean anything; a stripe may be negative.
CREATE TABLE intent_counts (
    tenant_id   text        NOT NULL,
    event_class text        NOT NULL,
    channel     text        NOT NULL,
    state       text        NOT NULL,
    code        text        NOT NULL,
    stripe      smallint    NOT NULL CHECK (stripe >= 0 AND stripe < 64),
    n           bigint      NOT NULL DEFAULT 0,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, event_class, channel, state, code, stripe)
);

-- The stripe this transaction writes: the first of 64, starting from its
-- backend's, whose transaction-scoped advisory lock it can take without
-- waiting, remembered for the rest of the transaction. With more than 64
-- writers at once the 65th waits for its backend's stripe (a lock
-- PostgreSQL's deadlock detector sees, unlike an order between rows).
CREATE FUNCTION counts_stripe() RETURNS smallint LANGUAGE plpgsql AS $$
DECLARE
    held text := current_setting('tidings.counts_stripe', true);
    first int := pg_backend_pid() % 64;
    s int;
BEGIN
    IF held IS NOT NULL AND held <> '' THEN
        RETURN held::smallint;
    END IF;
    FOR k IN 0..63 LOOP
        s := (first + k) % 64;
        IF pg_try_advisory_xact_lock(1953064039, s) THEN
            PERFORM set_config('tidings.counts_stripe', s::text, true);
            RETURN s;
        END IF;
    END LOOP;
    PERFORM pg_advisory_xact_lock(1953064039, first);
    PERFORM set_config('tidings.counts_stripe', first::text, true);
    RETURN first;
END $$;

CREATE FUNCTION intent_counts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO intent_counts AS c (tenant_id, event_class, channel, state, code, stripe, n,
                                    updated_at)
    SELECT d.tenant_id, d.event_class, d.channel, d.state, d.code, counts_stripe(), d.n, d.at
    FROM (SELECT n.tenant_id, n.event_class, n.channel, n.state,
                 coalesce(n.decision_code, '') AS code, count(*) AS n, max(n.updated_at) AS at
          FROM new_rows n
          GROUP BY 1, 2, 3, 4, 5
          ORDER BY 1, 2, 3, 4, 5) d
    ON CONFLICT (tenant_id, event_class, channel, state, code, stripe) DO UPDATE
    SET n = c.n + excluded.n, updated_at = greatest(c.updated_at, excluded.updated_at);
    RETURN NULL;
END $$;

-- Only rows whose key moved count: a lease renewed or a due time changed
-- leaves the numbers as they are and writes nothing.
CREATE FUNCTION intent_counts_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO intent_counts AS c (tenant_id, event_class, channel, state, code, stripe, n,
                                    updated_at)
    SELECT d.tenant_id, d.event_class, d.channel, d.state, d.code, counts_stripe(), d.n, d.at
    FROM (SELECT m.tenant_id, m.event_class, m.channel, m.state, m.code, sum(m.n) AS n,
                 max(m.at) AS at
          FROM new_rows n
          JOIN old_rows o ON o.tenant_id = n.tenant_id AND o.id = n.id
          CROSS JOIN LATERAL (VALUES
              (n.tenant_id, n.event_class, n.channel, n.state,
               coalesce(n.decision_code, ''), 1, n.updated_at),
              (o.tenant_id, o.event_class, o.channel, o.state,
               coalesce(o.decision_code, ''), -1, n.updated_at)
          ) AS m (tenant_id, event_class, channel, state, code, n, at)
          WHERE (n.state, n.decision_code, n.channel, n.event_class)
                IS DISTINCT FROM (o.state, o.decision_code, o.channel, o.event_class)
          GROUP BY 1, 2, 3, 4, 5
          HAVING sum(m.n) <> 0
          ORDER BY 1, 2, 3, 4, 5) d
    ON CONFLICT (tenant_id, event_class, channel, state, code, stripe) DO UPDATE
    SET n = c.n + excluded.n, updated_at = greatest(c.updated_at, excluded.updated_at);
    RETURN NULL;
END $$;

CREATE FUNCTION intent_counts_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO intent_counts AS c (tenant_id, event_class, channel, state, code, stripe, n,
                                    updated_at)
    SELECT d.tenant_id, d.event_class, d.channel, d.state, d.code, counts_stripe(), d.n,
           statement_timestamp()
    FROM (SELECT o.tenant_id, o.event_class, o.channel, o.state,
                 coalesce(o.decision_code, '') AS code, -count(*) AS n
          FROM old_rows o
          GROUP BY 1, 2, 3, 4, 5
          ORDER BY 1, 2, 3, 4, 5) d
    ON CONFLICT (tenant_id, event_class, channel, state, code, stripe) DO UPDATE
    SET n = c.n + excluded.n;
    RETURN NULL;
END $$;

CREATE TRIGGER intent_counts_inserted AFTER INSERT ON intents
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION intent_counts_inserted();
CREATE TRIGGER intent_counts_updated AFTER UPDATE ON intents
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION intent_counts_updated();
CREATE TRIGGER intent_counts_deleted AFTER DELETE ON intents
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION intent_counts_deleted();

-- The intents from before this migration, counted once in stripe 0. The
-- triggers above were created first in this transaction, which holds the
-- lock CREATE TRIGGER takes on intents until it commits: no write falls
-- between the count and the triggers.
INSERT INTO intent_counts (tenant_id, event_class, channel, state, code, stripe, n, updated_at)
SELECT tenant_id, event_class, channel, state, coalesce(decision_code, ''), 0, count(*),
       max(updated_at)
FROM intents
GROUP BY 1, 2, 3, 4, 5;
