-- Issue #42: the job_counts triggers (0033) cost dispatch when the intents
-- dispatched are no job's at all, and two transactions on one stripe could
-- deadlock. The counts they keep are the same (docs/jobs.md, "Kept
-- numbers"; tests/integration/test_job_counts_machine.py recounts them).
--
-- 1. A stripe per transaction, held: job_counts takes its stripe from
--    counts_stripe() (0043), the one a transaction writes intent_counts
--    on: the first of 64 no other running transaction holds (a
--    transaction-scoped advisory lock), kept to its end. Two transactions
--    then never write the same job_counts row, so they never wait on each
--    other there, in whatever order their statements touch a job's rows:
--    the deadlock seen with pg_backend_pid() % 32 (two backends whose ids
--    agree modulo 32, each holding a row the other's next statement
--    wanted) cannot happen. Only with more than 64 writers at once does one
--    wait, for a stripe lock the deadlock detector sees. The stripes go
--    from 32 to 64 for it; rows already kept stay where they are.
-- 2. Each trigger returns at once when its statement's rows cannot be a
--    job's: intents with no job_id; attempts, transitions and receipts of
--    tenants that have no job (an intent names a job only while the job's
--    row exists: retention removes a job after its intents); attempt
--    updates that change neither segments nor acceptance (the call-started
--    mark). No intent is looked up for them.

ALTER TABLE job_counts DROP CONSTRAINT job_counts_stripe_check;
ALTER TABLE job_counts ADD CONSTRAINT job_counts_stripe_check
    CHECK (stripe >= 0 AND stripe < 64);

CREATE OR REPLACE FUNCTION job_counts_add(deltas jsonb) RETURNS void LANGUAGE sql AS $$
    INSERT INTO job_counts AS c (tenant_id, job_id, stripe, channel, state, code, intents,
                                 attempts, retries, reached_provider, segments,
                                 retained_bytes, updated_at)
    SELECT d.tenant_id, d.job_id, (SELECT counts_stripe()), d.channel, d.state, d.code,
           d.intents, d.attempts, d.retries, d.reached_provider, d.segments,
           d.retained_bytes, d.updated_at
    FROM jsonb_to_recordset(deltas) AS d (tenant_id text, job_id uuid, channel text,
         state text, code text, intents bigint, attempts bigint, retries bigint,
         reached_provider bigint, segments bigint, retained_bytes bigint,
         updated_at timestamptz)
    ORDER BY d.tenant_id, d.job_id, d.channel, d.state, d.code
    ON CONFLICT (tenant_id, job_id, stripe, channel, state, code) DO UPDATE
    SET intents = c.intents + excluded.intents,
        attempts = c.attempts + excluded.attempts,
        retries = c.retries + excluded.retries,
        reached_provider = c.reached_provider + excluded.reached_provider,
        segments = c.segments + excluded.segments,
        retained_bytes = c.retained_bytes + excluded.retained_bytes,
        updated_at = greatest(c.updated_at, excluded.updated_at)
$$;

CREATE OR REPLACE FUNCTION job_counts_intents_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_rows WHERE job_id IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    PERFORM job_counts_add(jsonb_agg(d)) FROM (
        SELECT n.tenant_id, n.job_id, n.channel, n.state, coalesce(n.decision_code, '') AS code,
               count(*) AS intents, 0 AS attempts, 0 AS retries, 0 AS reached_provider,
               0 AS segments, sum(pg_column_size(n.*)) AS retained_bytes,
               max(n.updated_at) AS updated_at
        FROM new_rows n WHERE n.job_id IS NOT NULL
        GROUP BY n.tenant_id, n.job_id, n.channel, n.state, coalesce(n.decision_code, '')) d
    HAVING count(*) > 0;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION job_counts_intents_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_rows WHERE job_id IS NOT NULL)
       AND NOT EXISTS (SELECT 1 FROM old_rows WHERE job_id IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    PERFORM job_counts_add(jsonb_agg(d)) FROM (
        SELECT m.tenant_id, m.job_id, m.channel, m.state, m.code, sum(m.n) AS intents,
               0 AS attempts, 0 AS retries, 0 AS reached_provider, 0 AS segments,
               0 AS retained_bytes, max(m.at) AS updated_at
        FROM (SELECT n.tenant_id, n.job_id, n.channel, n.state,
                     coalesce(n.decision_code, '') AS code, 1 AS n, n.updated_at AS at
              FROM new_rows n JOIN old_rows o ON o.tenant_id = n.tenant_id AND o.id = n.id
              WHERE n.job_id IS NOT NULL AND (n.state, n.decision_code, n.channel)
                    IS DISTINCT FROM (o.state, o.decision_code, o.channel)
              UNION ALL
              SELECT o.tenant_id, o.job_id, o.channel, o.state,
                     coalesce(o.decision_code, ''), -1, n.updated_at
              FROM new_rows n JOIN old_rows o ON o.tenant_id = n.tenant_id AND o.id = n.id
              WHERE o.job_id IS NOT NULL AND (n.state, n.decision_code, n.channel)
                    IS DISTINCT FROM (o.state, o.decision_code, o.channel)) m
        GROUP BY m.tenant_id, m.job_id, m.channel, m.state, m.code
        HAVING sum(m.n) <> 0) d
    HAVING count(*) > 0;
    RETURN NULL;
END $$;

-- Whether any of these tenants has a job: if none does, no row of theirs
-- is a job's, and no intent needs looking up.
CREATE FUNCTION job_counts_tenants_have_jobs(tenants text[]) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM jobs j WHERE j.tenant_id = ANY(tenants))
$$;

CREATE OR REPLACE FUNCTION job_counts_attempts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT job_counts_tenants_have_jobs(ARRAY(SELECT DISTINCT tenant_id FROM new_rows)) THEN
        RETURN NULL;
    END IF;
    PERFORM job_counts_add(jsonb_agg(d)) FROM (
        SELECT a.tenant_id, i.job_id, a.channel, '' AS state, '' AS code, 0 AS intents,
               count(*) AS attempts, count(*) FILTER (WHERE a.n > 1) AS retries,
               count(*) FILTER (WHERE a.accepted_at IS NOT NULL) AS reached_provider,
               coalesce(sum(a.segments), 0) AS segments,
               sum(pg_column_size(a.*)) AS retained_bytes,
               max(greatest(a.created_at, a.accepted_at, a.last_status_at)) AS updated_at
        FROM new_rows a JOIN intents i ON i.tenant_id = a.tenant_id AND i.id = a.intent_id
        WHERE i.job_id IS NOT NULL
        GROUP BY a.tenant_id, i.job_id, a.channel) d
    HAVING count(*) > 0;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION job_counts_attempts_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Only segments and acceptance are counted: the changed rows first.
    IF NOT EXISTS (
        SELECT 1 FROM new_rows a
        JOIN old_rows o ON o.tenant_id = a.tenant_id AND o.intent_id = a.intent_id AND o.n = a.n
        WHERE a.segments IS DISTINCT FROM o.segments
           OR (a.accepted_at IS NULL) <> (o.accepted_at IS NULL))
       OR NOT job_counts_tenants_have_jobs(ARRAY(SELECT DISTINCT tenant_id FROM new_rows)) THEN
        RETURN NULL;
    END IF;
    PERFORM job_counts_add(jsonb_agg(d)) FROM (
        SELECT a.tenant_id, i.job_id, a.channel, '' AS state, '' AS code, 0 AS intents,
               0 AS attempts, 0 AS retries,
               sum((a.accepted_at IS NOT NULL)::int - (o.accepted_at IS NOT NULL)::int)
                   AS reached_provider,
               sum(coalesce(a.segments, 0) - coalesce(o.segments, 0)) AS segments,
               0 AS retained_bytes,
               max(greatest(a.created_at, a.accepted_at, a.last_status_at)) AS updated_at
        FROM new_rows a
        JOIN old_rows o ON o.tenant_id = a.tenant_id AND o.intent_id = a.intent_id AND o.n = a.n
        JOIN intents i ON i.tenant_id = a.tenant_id AND i.id = a.intent_id
        WHERE i.job_id IS NOT NULL
          AND (a.segments IS DISTINCT FROM o.segments
               OR (a.accepted_at IS NULL) <> (o.accepted_at IS NULL))
        GROUP BY a.tenant_id, i.job_id, a.channel) d
    HAVING count(*) > 0;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION job_counts_evidence_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT job_counts_tenants_have_jobs(ARRAY(SELECT DISTINCT tenant_id FROM new_rows)) THEN
        RETURN NULL;
    END IF;
    PERFORM job_counts_add(jsonb_agg(d)) FROM (
        SELECT e.tenant_id, i.job_id, i.channel, '' AS state, '' AS code, 0 AS intents,
               0 AS attempts, 0 AS retries, 0 AS reached_provider, 0 AS segments,
               sum(e.bytes) AS retained_bytes, max(i.updated_at) AS updated_at
        FROM (SELECT n.tenant_id, n.intent_id, pg_column_size(n.*) AS bytes FROM new_rows n) e
        JOIN intents i ON i.tenant_id = e.tenant_id AND i.id = e.intent_id
        WHERE i.job_id IS NOT NULL
        GROUP BY e.tenant_id, i.job_id, i.channel) d
    HAVING count(*) > 0;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION job_counts_attempts_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM old_rows
                   WHERE state = 'sending' AND call_started_at IS NULL)
       OR NOT job_counts_tenants_have_jobs(ARRAY(SELECT DISTINCT tenant_id FROM old_rows)) THEN
        RETURN NULL;
    END IF;
    PERFORM job_counts_add(jsonb_agg(d)) FROM (
        SELECT a.tenant_id, i.job_id, a.channel, '' AS state, '' AS code, 0 AS intents,
               -count(*) AS attempts, -count(*) FILTER (WHERE a.n > 1) AS retries,
               -count(*) FILTER (WHERE a.accepted_at IS NOT NULL) AS reached_provider,
               -coalesce(sum(a.segments), 0) AS segments,
               -sum(pg_column_size(a.*)) AS retained_bytes, max(i.updated_at) AS updated_at
        FROM old_rows a JOIN intents i ON i.tenant_id = a.tenant_id AND i.id = a.intent_id
        WHERE i.job_id IS NOT NULL AND a.state = 'sending' AND a.call_started_at IS NULL
        GROUP BY a.tenant_id, i.job_id, a.channel) d
    HAVING count(*) > 0;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION job_counts_recipients_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM job_counts_add(jsonb_agg(d)) FROM (
        SELECT r.tenant_id, r.job_id, '' AS channel, '' AS state, '' AS code, 0 AS intents,
               0 AS attempts, 0 AS retries, 0 AS reached_provider, 0 AS segments,
               sum(pg_column_size(r.*)) AS retained_bytes, max(j.updated_at) AS updated_at
        FROM new_rows r JOIN jobs j ON j.tenant_id = r.tenant_id AND j.id = r.job_id
        GROUP BY r.tenant_id, r.job_id) d
    HAVING count(*) > 0;
    RETURN NULL;
END $$;
