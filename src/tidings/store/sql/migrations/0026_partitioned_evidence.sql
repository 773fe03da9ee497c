-- Partitioned evidence (docs/retention.md, docs/scaling.md): attempts,
-- transitions, events and observations are partitioned by the intent's id,
-- a UUIDv7 whose leading bits are its creation time, one partition per
-- month (store/evidence_partitions.py creates them ahead and drops a month
-- whole once every intent in it is past its clock). Every key of these
-- tables now includes intent_id, the partition key, so PostgreSQL can
-- enforce it per partition:
-- - attempts lose UNIQUE (tenant_id, attempt_key): the key is made from
--   (intent id, n), the primary key, so it is unique by construction;
-- - observations are deduplicated per (tenant, intent, provider, dedupe
--   key): one provider event always names the same attempt;
-- - receipts that match no attempt yet have no intent, so they wait in a
--   table of their own, unmatched_observations, until they are matched.
-- Rows are copied into the new tables (into their default partitions;
-- the monthly ones are made, and filled, right after the migrations).

-- Receipts that arrived before the attempt they name was known.
CREATE TABLE unmatched_observations (
    tenant_id           text        NOT NULL,
    id                  bigint      GENERATED ALWAYS AS IDENTITY,
    provider            text        NOT NULL,
    dedupe_key          text        NOT NULL,
    provider_message_id text,
    status              text        NOT NULL,
    code                text,
    raw_status          text,
    source              text        NOT NULL CHECK (source IN ('webhook', 'poll', 'send', 'lookup')),
    occurred_at         timestamptz,
    received_at         timestamptz NOT NULL,
    effect              text,
    raw                 jsonb       NOT NULL DEFAULT '{}'::jsonb,
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, provider, dedupe_key)
);
CREATE INDEX unmatched_observations_message
    ON unmatched_observations (provider, provider_message_id);
CREATE INDEX unmatched_observations_age ON unmatched_observations (received_at);

INSERT INTO unmatched_observations (tenant_id, provider, dedupe_key, provider_message_id, status,
                                    code, raw_status, source, occurred_at, received_at, effect, raw)
SELECT tenant_id, provider, dedupe_key, provider_message_id, status, code, raw_status, source,
       occurred_at, received_at, effect, raw
FROM observations WHERE intent_id IS NULL ORDER BY id;

-- The old tables step aside (their keys, indexes and sequences renamed out
-- of the way), the partitioned ones take their names, the rows move over.
ALTER TABLE attempts RENAME TO attempts_0025;
ALTER TABLE transitions RENAME TO transitions_0025;
ALTER TABLE observations RENAME TO observations_0025;
ALTER TABLE events RENAME TO events_0025;
DROP INDEX attempts_provider_message, attempts_checks, attempts_key, attempts_open_calls,
    observations_intent, observations_unmatched, events_cursor, transitions_recent;
ALTER TABLE attempts_0025 DROP CONSTRAINT attempts_pkey,
    DROP CONSTRAINT attempts_tenant_id_attempt_key_key,
    DROP CONSTRAINT attempts_tenant_id_intent_id_fkey,
    DROP CONSTRAINT attempts_n_check, DROP CONSTRAINT attempts_state_check,
    DROP CONSTRAINT attempts_response_body_check;
ALTER TABLE transitions_0025 DROP CONSTRAINT transitions_pkey,
    DROP CONSTRAINT transitions_tenant_id_intent_id_version_key,
    DROP CONSTRAINT transitions_tenant_id_intent_id_fkey;
ALTER TABLE observations_0025 DROP CONSTRAINT observations_pkey,
    DROP CONSTRAINT observations_tenant_id_provider_dedupe_key_key,
    DROP CONSTRAINT observations_source_check;
ALTER TABLE events_0025 DROP CONSTRAINT events_pkey;
ALTER SEQUENCE transitions_id_seq RENAME TO transitions_0025_id_seq;
ALTER SEQUENCE observations_id_seq RENAME TO observations_0025_id_seq;
ALTER SEQUENCE events_id_seq RENAME TO events_0025_id_seq;

CREATE TABLE attempts (
    tenant_id           text        NOT NULL,
    intent_id           uuid        NOT NULL,
    n                   integer     NOT NULL CHECK (n >= 1),
    attempt_key         text        NOT NULL,
    channel             text        NOT NULL,
    state               text        NOT NULL CHECK (state IN (
                            'sending', 'accepted', 'delivered', 'undelivered', 'failed',
                            'unknown')),
    provider            text        NOT NULL,
    provider_message_id text,
    code                text,
    segments            integer,
    encoding            text,
    created_at          timestamptz NOT NULL,
    accepted_at         timestamptz,
    last_status_at      timestamptz,
    terminal_at         timestamptz,
    check_count         integer     NOT NULL DEFAULT 0,
    next_check_at       timestamptz,
    checks_expire_at    timestamptz,
    call_started_at     timestamptz,
    response_body       text CHECK (octet_length(response_body) <= 2048),
    PRIMARY KEY (tenant_id, intent_id, n),
    FOREIGN KEY (tenant_id, intent_id) REFERENCES intents (tenant_id, id)
) PARTITION BY RANGE (intent_id);
CREATE TABLE attempts_default PARTITION OF attempts DEFAULT;
CREATE INDEX attempts_provider_message ON attempts (provider, provider_message_id)
    WHERE provider_message_id IS NOT NULL;
CREATE INDEX attempts_checks ON attempts (next_check_at)
    WHERE state IN ('sending', 'accepted', 'unknown') AND next_check_at IS NOT NULL;
CREATE INDEX attempts_key ON attempts (attempt_key);
CREATE INDEX attempts_open_calls ON attempts (provider, call_started_at)
    WHERE provider_message_id IS NULL AND state IN ('sending', 'unknown')
      AND call_started_at IS NOT NULL;

CREATE TABLE transitions (
    tenant_id       text        NOT NULL,
    id              bigint      GENERATED ALWAYS AS IDENTITY,
    intent_id       uuid        NOT NULL,
    version         integer     NOT NULL,
    from_state      text,
    to_state        text        NOT NULL,
    event           text        NOT NULL,
    actor           text        NOT NULL,
    input           jsonb       NOT NULL DEFAULT '{}'::jsonb,
    policy_version  text,
    decision_code   text,
    at              timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id, intent_id),
    UNIQUE (tenant_id, intent_id, version),
    FOREIGN KEY (tenant_id, intent_id) REFERENCES intents (tenant_id, id)
) PARTITION BY RANGE (intent_id);
CREATE TABLE transitions_default PARTITION OF transitions DEFAULT;
CREATE INDEX transitions_recent ON transitions (tenant_id, at);

CREATE TABLE observations (
    tenant_id           text        NOT NULL,
    id                  bigint      GENERATED ALWAYS AS IDENTITY,
    provider            text        NOT NULL,
    dedupe_key          text        NOT NULL,
    intent_id           uuid        NOT NULL,
    attempt_n           integer,
    provider_message_id text,
    status              text        NOT NULL,
    code                text,
    raw_status          text,
    source              text        NOT NULL CHECK (source IN ('webhook', 'poll', 'send', 'lookup')),
    occurred_at         timestamptz,
    received_at         timestamptz NOT NULL,
    effect              text,
    raw                 jsonb       NOT NULL DEFAULT '{}'::jsonb,
    PRIMARY KEY (tenant_id, intent_id, id),
    UNIQUE (tenant_id, intent_id, provider, dedupe_key)
) PARTITION BY RANGE (intent_id);
CREATE TABLE observations_default PARTITION OF observations DEFAULT;

CREATE TABLE events (
    tenant_id   text        NOT NULL,
    id          bigint      GENERATED ALWAYS AS IDENTITY,
    txid        xid8        NOT NULL DEFAULT pg_current_xact_id(),
    type        text        NOT NULL,
    intent_id   uuid        NOT NULL,
    job_id      uuid,
    payload     jsonb       NOT NULL DEFAULT '{}'::jsonb,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, intent_id, id)
) PARTITION BY RANGE (intent_id);
CREATE TABLE events_default PARTITION OF events DEFAULT;
CREATE INDEX events_cursor ON events (tenant_id, txid, id);

INSERT INTO attempts (tenant_id, intent_id, n, attempt_key, channel, state, provider,
                      provider_message_id, code, segments, encoding, created_at, accepted_at,
                      last_status_at, terminal_at, check_count, next_check_at, checks_expire_at,
                      call_started_at, response_body)
SELECT tenant_id, intent_id, n, attempt_key, channel, state, provider, provider_message_id, code,
       segments, encoding, created_at, accepted_at, last_status_at, terminal_at, check_count,
       next_check_at, checks_expire_at, call_started_at, response_body
FROM attempts_0025;

INSERT INTO transitions (tenant_id, id, intent_id, version, from_state, to_state, event, actor,
                         input, policy_version, decision_code, at)
OVERRIDING SYSTEM VALUE
SELECT tenant_id, id, intent_id, version, from_state, to_state, event, actor, input,
       policy_version, decision_code, at
FROM transitions_0025;

INSERT INTO observations (tenant_id, id, provider, dedupe_key, intent_id, attempt_n,
                          provider_message_id, status, code, raw_status, source, occurred_at,
                          received_at, effect, raw)
OVERRIDING SYSTEM VALUE
SELECT tenant_id, id, provider, dedupe_key, intent_id, attempt_n, provider_message_id, status,
       code, raw_status, source, occurred_at, received_at, effect, raw
FROM observations_0025 WHERE intent_id IS NOT NULL;

-- Every event is an intent's (no statement writes one without): a row
-- without one stops the migration here rather than vanish.
INSERT INTO events (tenant_id, id, txid, type, intent_id, job_id, payload, created_at)
OVERRIDING SYSTEM VALUE
SELECT tenant_id, id, txid, type, intent_id, job_id, payload, created_at FROM events_0025;

-- Ids go on from where the old tables left them: readers page by them.
SELECT setval(pg_get_serial_sequence('transitions', 'id'),
              (SELECT coalesce(max(id), 0) + 1 FROM transitions_0025), false);
SELECT setval(pg_get_serial_sequence('observations', 'id'),
              (SELECT coalesce(max(id), 0) + 1 FROM observations_0025), false);
SELECT setval(pg_get_serial_sequence('events', 'id'),
              (SELECT coalesce(max(id), 0) + 1 FROM events_0025), false);

DROP TABLE attempts_0025, transitions_0025, observations_0025, events_0025;

-- One row per month of evidence partitions, the deployment's (a reference
-- table on Citus, docs/scaling.md): its range of intent ids, and when each
-- of its two clocks' partitions were dropped whole.
CREATE TABLE evidence_months (
    month                    date        PRIMARY KEY,
    lower_id                 uuid        NOT NULL,
    upper_id                 uuid        NOT NULL,
    created_at               timestamptz NOT NULL,
    attempts_dropped_at      timestamptz,
    observations_dropped_at  timestamptz,
    CHECK (lower_id < upper_id)
);

-- The purge walks the intents of one month (a range of ids) whose attempt
-- evidence is still kept: by id now, not by end time.
DROP INDEX intents_attempts_kept;
CREATE INDEX intents_attempts_kept ON intents (tenant_id, policy_version, id)
    WHERE terminal_at IS NOT NULL AND attempts_purged_at IS NULL;

-- The month's partitions of the four evidence tables, and its row in
-- evidence_months, in the caller's transaction. Rows the default
-- partitions hold for that month (written while it had no partition of
-- its own) are moved into it: PostgreSQL refuses a partition whose rows
-- sit in the default one. False when the month exists already.
CREATE FUNCTION evidence_month_create(p_month date, p_lower uuid, p_upper uuid,
                                      p_now timestamptz)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    parent text;
    part text;
BEGIN
    IF EXISTS (SELECT 1 FROM evidence_months WHERE month = p_month) THEN
        RETURN false;
    END IF;
    FOREACH parent IN ARRAY ARRAY['attempts', 'transitions', 'events', 'observations'] LOOP
        part := parent || '_' || to_char(p_month, 'YYYY_MM');
        EXECUTE format('CREATE TEMP TABLE evidence_moving (LIKE %I) ON COMMIT DROP', parent);
        EXECUTE format(
            'WITH moved AS (DELETE FROM %I WHERE intent_id >= $1 AND intent_id < $2 RETURNING *)'
            ' INSERT INTO evidence_moving SELECT * FROM moved', parent || '_default')
            USING p_lower, p_upper;
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                       part, parent, p_lower, p_upper);
        EXECUTE format('INSERT INTO %I OVERRIDING SYSTEM VALUE SELECT * FROM evidence_moving',
                       parent);
        DROP TABLE evidence_moving;
    END LOOP;
    INSERT INTO evidence_months (month, lower_id, upper_id, created_at)
    VALUES (p_month, p_lower, p_upper, p_now);
    RETURN true;
END $$;

-- One month's partition of one evidence table, dropped whole: what it held
-- is gone at once, with no row deleted one by one (no dead rows, no
-- vacuum). The rows of the intents in `p_keep` (the few a month that has
-- outlived every clock still needs) are kept: moved out first, they land
-- in the default partition when put back, the month's range having no
-- partition of its own any more.
CREATE FUNCTION evidence_month_drop(p_parent text, p_month date, p_keep uuid[])
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
        EXECUTE format('INSERT INTO %I OVERRIDING SYSTEM VALUE SELECT * FROM evidence_kept',
                       p_parent);
        DROP TABLE evidence_kept;
    END IF;
    RETURN kept;
END $$;

-- An intent's attempts, transitions and events, for the intents in `p_ids`
-- (the one tenant's), and each intent marked as having lost them: what the
-- attempt clock takes row by row (retention.sql), in one statement.
CREATE FUNCTION purge_attempt_evidence_of(p_tenant text, p_ids uuid[], p_now timestamptz)
RETURNS TABLE (intents bigint, attempts bigint) LANGUAGE sql AS $$
    WITH gone_transitions AS (
        DELETE FROM transitions WHERE tenant_id = p_tenant AND intent_id = ANY(p_ids)
    ), gone_events AS (
        DELETE FROM events WHERE tenant_id = p_tenant AND intent_id = ANY(p_ids)
    ), gone_attempts AS (
        DELETE FROM attempts WHERE tenant_id = p_tenant AND intent_id = ANY(p_ids)
        RETURNING 1
    ), marked AS (
        UPDATE intents SET attempts_purged_at = p_now
        WHERE tenant_id = p_tenant AND id = ANY(p_ids)
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM marked), (SELECT count(*) FROM gone_attempts)
$$;
