-- A month whose evidence goes whole moves the rows still needed to the
-- default partitions by inserting them again (evidence_month_drop); the
-- job counts' insert triggers counted those rows a second time: a job's
-- attempts, retries, segments and retained bytes doubled for every intent
-- kept apart. The move now says so for the rest of its statement, and the
-- triggers' first check skips rows that are being moved, not made.
CREATE OR REPLACE FUNCTION evidence_month_drop(p_parent text, p_month date, p_keep uuid[])
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    part text := p_parent || '_' || to_char(p_month, 'YYYY_MM');
    kept bigint := 0;
BEGIN
    IF p_parent NOT IN ('attempts', 'transitions', 'events', 'observations') THEN
        RAISE EXCEPTION 'not an evidence table: %', p_parent;
    END IF;
    IF to_regclass(part) IS NULL THEN
        RETURN 0;
    END IF;
    IF cardinality(p_keep) > 0 THEN
        EXECUTE format('CREATE TEMP TABLE evidence_kept ON COMMIT DROP AS'
                       ' SELECT * FROM %I WHERE intent_id = ANY($1)', part) USING p_keep;
        GET DIAGNOSTICS kept = ROW_COUNT;
    END IF;
    EXECUTE format('DROP TABLE %I', part);
    IF kept > 0 THEN
        -- The same evidence in another partition: the count triggers skip it.
        PERFORM set_config('tidings.evidence_moving', 'on', true);
        EXECUTE format('INSERT INTO %I OVERRIDING SYSTEM VALUE SELECT * FROM evidence_kept',
                       p_parent);
        PERFORM set_config('tidings.evidence_moving', 'off', true);
        DROP TABLE evidence_kept;
    END IF;
    RETURN kept;
END $$;

CREATE OR REPLACE FUNCTION job_counts_tenants_have_jobs(tenants text[]) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce(current_setting('tidings.evidence_moving', true), '') <> 'on'
       AND EXISTS (SELECT 1 FROM jobs j WHERE j.tenant_id = ANY(tenants))
$$;
