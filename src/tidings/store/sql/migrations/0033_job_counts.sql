-- A job's numbers, kept rather than recounted (issue 38; docs/jobs.md,
-- "Status"): triggers on intents, attempts, transitions, observations and
-- job_recipients add each statement's changes to job_counts in the same
-- transaction, so GET /v1/jobs/{id} sums one job's few rows whatever its
-- audience. Rows are striped: a transaction writes the stripe of its
-- backend (pg_backend_pid() % 32), so workers sending one job do not queue
-- on one hot row; a count moved from one state to another may leave a
-- stripe negative, only sums over a job's stripes mean anything.
-- channel '' holds the job's own facts (its frozen audience's bytes);
-- state '' holds attempt figures of a channel; code '' is no decision code.
-- Nothing is taken away when retention purges evidence: the numbers are
-- what the job did, and stay until the job itself is purged (cascade).
CREATE TABLE job_counts (
    tenant_id        text        NOT NULL,
    job_id           uuid        NOT NULL,
    stripe           smallint    NOT NULL CHECK (stripe >= 0 AND stripe < 32),
    channel          text        NOT NULL,
    state            text        NOT NULL,
    code             text        NOT NULL,
    intents          bigint      NOT NULL DEFAULT 0,
    attempts         bigint      NOT NULL DEFAULT 0,
    retries          bigint      NOT NULL DEFAULT 0,
    reached_provider bigint      NOT NULL DEFAULT 0,
    segments         bigint      NOT NULL DEFAULT 0,
    retained_bytes   bigint      NOT NULL DEFAULT 0,
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, job_id, stripe, channel, state, code),
    FOREIGN KEY (tenant_id, job_id) REFERENCES jobs (tenant_id, id) ON DELETE CASCADE
);

-- Adds a statement's grouped changes. Rows are locked in key order, so two
-- statements never take the same rows in opposite orders.
CREATE FUNCTION job_counts_add(deltas jsonb) RETURNS void LANGUAGE sql AS $$
    INSERT INTO job_counts AS c (tenant_id, job_id, stripe, channel, state, code, intents,
                                 attempts, retries, reached_provider, segments,
                                 retained_bytes, updated_at)
    SELECT d.tenant_id, d.job_id, pg_backend_pid() % 32, d.channel, d.state, d.code,
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

-- Intents written: one more in its state and code, and its bytes.
CREATE FUNCTION job_counts_intents_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM job_counts_add(coalesce(jsonb_agg(d), '[]'::jsonb)) FROM (
        SELECT n.tenant_id, n.job_id, n.channel, n.state, coalesce(n.decision_code, '') AS code,
               count(*) AS intents, 0 AS attempts, 0 AS retries, 0 AS reached_provider,
               0 AS segments, sum(pg_column_size(n.*)) AS retained_bytes,
               max(n.updated_at) AS updated_at
        FROM new_rows n WHERE n.job_id IS NOT NULL
        GROUP BY n.tenant_id, n.job_id, n.channel, n.state, coalesce(n.decision_code, '')) d;
    RETURN NULL;
END $$;

-- Intents moved: one less where each was, one more where it is.
CREATE FUNCTION job_counts_intents_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM job_counts_add(coalesce(jsonb_agg(d), '[]'::jsonb)) FROM (
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
        HAVING sum(m.n) <> 0) d;
    RETURN NULL;
END $$;

-- Attempts made: per channel, the attempt, whether it is a retry (n > 1),
-- its segments and whether it reached the provider, and its bytes.
CREATE FUNCTION job_counts_attempts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM job_counts_add(coalesce(jsonb_agg(d), '[]'::jsonb)) FROM (
        SELECT a.tenant_id, i.job_id, a.channel, '' AS state, '' AS code, 0 AS intents,
               count(*) AS attempts, count(*) FILTER (WHERE a.n > 1) AS retries,
               count(*) FILTER (WHERE a.accepted_at IS NOT NULL) AS reached_provider,
               coalesce(sum(a.segments), 0) AS segments,
               sum(pg_column_size(a.*)) AS retained_bytes,
               max(greatest(a.created_at, a.accepted_at, a.last_status_at)) AS updated_at
        FROM new_rows a JOIN intents i ON i.tenant_id = a.tenant_id AND i.id = a.intent_id
        WHERE i.job_id IS NOT NULL
        GROUP BY a.tenant_id, i.job_id, a.channel) d;
    RETURN NULL;
END $$;

-- Attempts settled: segments counted and acceptance recorded after the insert.
CREATE FUNCTION job_counts_attempts_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM job_counts_add(coalesce(jsonb_agg(d), '[]'::jsonb)) FROM (
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
        GROUP BY a.tenant_id, i.job_id, a.channel) d;
    RETURN NULL;
END $$;

-- Evidence written about a job's intents (transitions, receipts): its bytes.
CREATE FUNCTION job_counts_evidence_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM job_counts_add(coalesce(jsonb_agg(d), '[]'::jsonb)) FROM (
        SELECT e.tenant_id, i.job_id, i.channel, '' AS state, '' AS code, 0 AS intents,
               0 AS attempts, 0 AS retries, 0 AS reached_provider, 0 AS segments,
               sum(e.bytes) AS retained_bytes, max(i.updated_at) AS updated_at
        FROM (SELECT n.tenant_id, n.intent_id, pg_column_size(n.*) AS bytes FROM new_rows n) e
        JOIN intents i ON i.tenant_id = e.tenant_id AND i.id = e.intent_id
        WHERE i.job_id IS NOT NULL
        GROUP BY e.tenant_id, i.job_id, i.channel) d;
    RETURN NULL;
END $$;

-- The frozen audience: the job's own facts, under channel ''.
CREATE FUNCTION job_counts_recipients_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM job_counts_add(coalesce(jsonb_agg(d), '[]'::jsonb)) FROM (
        SELECT r.tenant_id, r.job_id, '' AS channel, '' AS state, '' AS code, 0 AS intents,
               0 AS attempts, 0 AS retries, 0 AS reached_provider, 0 AS segments,
               sum(pg_column_size(r.*)) AS retained_bytes, max(j.updated_at) AS updated_at
        FROM new_rows r JOIN jobs j ON j.tenant_id = r.tenant_id AND j.id = r.job_id
        GROUP BY r.tenant_id, r.job_id) d;
    RETURN NULL;
END $$;

-- Statement triggers with transition tables: one pass per statement, not
-- per row; on a partitioned table they cover every partition, present and
-- future (store/evidence_partitions.py creates months with PARTITION OF).
CREATE TRIGGER job_counts_intents_inserted AFTER INSERT ON intents
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION job_counts_intents_inserted();
CREATE TRIGGER job_counts_intents_updated AFTER UPDATE ON intents
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION job_counts_intents_updated();
CREATE TRIGGER job_counts_attempts_inserted AFTER INSERT ON attempts
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION job_counts_attempts_inserted();
CREATE TRIGGER job_counts_attempts_updated AFTER UPDATE ON attempts
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION job_counts_attempts_updated();
CREATE TRIGGER job_counts_transitions_inserted AFTER INSERT ON transitions
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION job_counts_evidence_inserted();
CREATE TRIGGER job_counts_observations_inserted AFTER INSERT ON observations
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION job_counts_evidence_inserted();
CREATE TRIGGER job_counts_recipients_inserted AFTER INSERT ON job_recipients
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION job_counts_recipients_inserted();

-- Attempts withdrawn: a claim whose call never started leaves no attempt
-- (attempt_unstarted_withdrawn), so it is no longer counted. Any other
-- delete is retention's, which takes evidence and leaves the numbers.
CREATE FUNCTION job_counts_attempts_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM job_counts_add(coalesce(jsonb_agg(d), '[]'::jsonb)) FROM (
        SELECT a.tenant_id, i.job_id, a.channel, '' AS state, '' AS code, 0 AS intents,
               -count(*) AS attempts, -count(*) FILTER (WHERE a.n > 1) AS retries,
               -count(*) FILTER (WHERE a.accepted_at IS NOT NULL) AS reached_provider,
               -coalesce(sum(a.segments), 0) AS segments,
               -sum(pg_column_size(a.*)) AS retained_bytes, max(i.updated_at) AS updated_at
        FROM old_rows a JOIN intents i ON i.tenant_id = a.tenant_id AND i.id = a.intent_id
        WHERE i.job_id IS NOT NULL AND a.state = 'sending' AND a.call_started_at IS NULL
        GROUP BY a.tenant_id, i.job_id, a.channel) d;
    RETURN NULL;
END $$;
CREATE TRIGGER job_counts_attempts_deleted AFTER DELETE ON attempts
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION job_counts_attempts_deleted();

-- Jobs from before this migration are counted once here, from their rows,
-- in stripe 0 (docs/jobs.md, "Kept numbers"). A job whose final counts
-- retention already kept (its evidence may be gone) is counted from those;
-- they have no decision codes, and their attempt figures no channel ('').
INSERT INTO job_counts (tenant_id, job_id, stripe, channel, state, code, intents,
                        retained_bytes, updated_at)
SELECT i.tenant_id, i.job_id, 0, i.channel, i.state, coalesce(i.decision_code, ''), count(*),
       sum(pg_column_size(i.*)), max(i.updated_at)
FROM intents i JOIN jobs j ON j.tenant_id = i.tenant_id AND j.id = i.job_id
WHERE j.final_counts IS NULL
GROUP BY i.tenant_id, i.job_id, i.channel, i.state, coalesce(i.decision_code, '');

INSERT INTO job_counts (tenant_id, job_id, stripe, channel, state, code, intents, updated_at)
SELECT j.tenant_id, j.id, 0, c.key, s.key, '', s.value::bigint, j.updated_at
FROM jobs j, jsonb_each(j.final_counts_by_channel) c, jsonb_each_text(c.value) s
WHERE j.final_counts IS NOT NULL AND s.value::bigint <> 0;

INSERT INTO job_counts (tenant_id, job_id, stripe, channel, state, code, attempts, retries,
                        reached_provider, segments, updated_at)
SELECT j.tenant_id, j.id, 0, '', '', '', coalesce((j.final_cost ->> 'attempts')::bigint, 0), 0,
       coalesce((j.final_cost ->> 'reached_provider')::bigint, 0),
       coalesce((j.final_cost ->> 'segments')::bigint, 0), j.updated_at
FROM jobs j WHERE j.final_counts IS NOT NULL;

INSERT INTO job_counts AS c (tenant_id, job_id, stripe, channel, state, code, attempts, retries,
                             reached_provider, segments, retained_bytes, updated_at)
SELECT a.tenant_id, i.job_id, 0, a.channel, '', '', count(*), count(*) FILTER (WHERE a.n > 1),
       count(*) FILTER (WHERE a.accepted_at IS NOT NULL), coalesce(sum(a.segments), 0),
       sum(pg_column_size(a.*)), max(greatest(a.created_at, a.accepted_at, a.last_status_at))
FROM attempts a
JOIN intents i ON i.tenant_id = a.tenant_id AND i.id = a.intent_id
JOIN jobs j ON j.tenant_id = i.tenant_id AND j.id = i.job_id
WHERE j.final_counts IS NULL
GROUP BY a.tenant_id, i.job_id, a.channel;

-- Bytes of the evidence still held, whatever kept the counts.
INSERT INTO job_counts AS c (tenant_id, job_id, stripe, channel, state, code, retained_bytes,
                             updated_at)
SELECT e.tenant_id, e.job_id, 0, e.channel, '', '', sum(e.bytes), max(e.updated_at)
FROM (SELECT i.tenant_id, i.job_id, i.channel, pg_column_size(t.*) AS bytes, i.updated_at
      FROM transitions t JOIN intents i ON i.tenant_id = t.tenant_id AND i.id = t.intent_id
      WHERE i.job_id IS NOT NULL
      UNION ALL
      SELECT i.tenant_id, i.job_id, i.channel, pg_column_size(o.*), i.updated_at
      FROM observations o JOIN intents i ON i.tenant_id = o.tenant_id AND i.id = o.intent_id
      WHERE i.job_id IS NOT NULL
      UNION ALL
      SELECT r.tenant_id, r.job_id, '', pg_column_size(r.*), j.updated_at
      FROM job_recipients r JOIN jobs j ON j.tenant_id = r.tenant_id AND j.id = r.job_id) e
GROUP BY e.tenant_id, e.job_id, e.channel
ON CONFLICT (tenant_id, job_id, stripe, channel, state, code) DO UPDATE
SET retained_bytes = c.retained_bytes + excluded.retained_bytes,
    updated_at = greatest(c.updated_at, excluded.updated_at);
