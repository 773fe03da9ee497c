-- name: ensure_tenant
INSERT INTO tenants (tenant_id, name)
VALUES (%(tenant_id)s, %(name)s)
ON CONFLICT (tenant_id) DO NOTHING;

-- name: store_destination
INSERT INTO destinations (tenant_id, destination_hash, channel, ciphertext, country)
VALUES (%(tenant_id)s, %(destination_hash)s, %(channel)s, %(ciphertext)s, %(country)s)
ON CONFLICT (tenant_id, destination_hash) DO NOTHING;

-- name: destination_ciphertext
SELECT ciphertext FROM destinations
WHERE tenant_id = %(tenant_id)s AND destination_hash = %(destination_hash)s;

-- name: intake_context
-- What a create needs to know, in one round trip: the template's candidate
-- revisions (newest per locale, or the one asked for), the newest revision
-- of the name (any locale or channel: what create_intent checks is still
-- the newest), and the tenant's current policy. One row per candidate
-- revision; a single row of NULL template columns when there is none.
-- Read only when the process has not cached these (intake_cache.py), or
-- when create_intent found what it cached no longer current. Whether the
-- key is taken is left to create_intent's arbiter index: a lookup here was
-- planned, on a table not yet analyzed, as a scan of every intent of the
-- tenant.
SELECT p.version AS policy_version, p.document AS policy_document,
       (SELECT max(revision) FROM templates
        WHERE tenant_id = %(tenant_id)s AND name = %(name)s) AS newest_revision,
       t.tenant_id AS t_tenant_id, t.name AS t_name, t.revision AS t_revision,
       t.channel AS t_channel, t.locale AS t_locale, t.subject AS t_subject, t.body AS t_body,
       t.html_body AS t_html_body, t.required_variables AS t_required_variables,
       t.attachment_policy AS t_attachment_policy,
       t.provider_template_ids AS t_provider_template_ids,
       t.dispatch_variables AS t_dispatch_variables
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (
    SELECT version, document FROM policies
    WHERE tenant_id = %(tenant_id)s AND quarantine_code IS NULL
    ORDER BY published_at DESC, version DESC LIMIT 1
) AS p ON true
LEFT JOIN LATERAL (
    SELECT DISTINCT ON (locale) * FROM templates
    WHERE tenant_id = %(tenant_id)s AND name = %(name)s AND channel = %(channel)s
      AND (%(revision)s::int IS NULL OR revision = %(revision)s::int)
    ORDER BY locale, revision DESC
) AS t ON true;

-- name: create_intent
-- Insert-or-nothing, under a policy version and template revision still
-- current. The caller chose them from its process's cache; the insert
-- happens only if the tenant's current policy is still that version (or
-- still none), and, unless the request pinned a revision (newest_revision
-- NULL), the name has no revision newer than the newest the caller saw:
-- any locale or channel, since a new locale's revision can change which
-- one a recipient gets, and one name's revision numbers only grow. When
-- stale, nothing is written and still_current is false: the caller reads
-- again (intake_context) and retries. When current but the key is taken (a
-- replay, or a concurrent create), nothing is written and the intent's
-- columns are NULL: the caller reads the first intent instead.
-- The creation is audited as version 1, and the destination stored beside
-- it. The foreign key from the intent to its destination is checked when
-- the whole statement is done, so the order of the CTEs does not matter.
WITH chosen AS (
    SELECT (SELECT version FROM policies
            WHERE tenant_id = %(tenant_id)s AND quarantine_code IS NULL
            ORDER BY published_at DESC, version DESC LIMIT 1)
               IS NOT DISTINCT FROM %(policy_version)s::text
           AND (%(newest_revision)s::int IS NULL
                OR (SELECT max(revision) FROM templates
                    WHERE tenant_id = %(tenant_id)s AND name = %(template_name)s)
                   = %(newest_revision)s::int) AS still_current
), created AS (
    INSERT INTO intents (
        tenant_id, id, idempotency_key, request_hash, channel, state, recipient_ref,
        destination_hash, country, timezone, locale, template_name, template_revision,
        variables, purpose, event_class, correlation_id, job_id, policy_version,
        decision_code, resend_budget, expires_at, not_before, next_due_at, created_by,
        created_at, terminal_at, updated_at, candidate_timezones)
    SELECT
        %(tenant_id)s, %(id)s, %(idempotency_key)s, %(request_hash)s, %(channel)s, %(state)s,
        %(recipient_ref)s, %(destination_hash)s, %(country)s, %(timezone)s, %(locale)s,
        %(template_name)s, %(template_revision)s, %(variables)s, %(purpose)s, %(event_class)s,
        %(correlation_id)s, %(job_id)s, %(policy_version)s::text, %(decision_code)s::text,
        %(resend_budget)s, %(expires_at)s, %(not_before)s, %(next_due_at)s::timestamptz, %(actor)s,
        %(now)s, %(terminal_at)s, %(now)s, %(candidate_timezones)s::text[]
    FROM chosen WHERE still_current
    ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
    RETURNING *
), destination AS (
    -- The one encrypted copy of the destination, written with its intent.
    INSERT INTO destinations (tenant_id, destination_hash, channel, ciphertext, country)
    SELECT tenant_id, destination_hash, channel, %(ciphertext)s, %(country)s FROM created
    ON CONFLICT (tenant_id, destination_hash) DO NOTHING
), audit AS (
    INSERT INTO transitions (tenant_id, intent_id, version, from_state, to_state, event,
                             actor, input, policy_version, decision_code, at)
    SELECT tenant_id, id, version, NULL, state, 'create', %(actor)s, %(input)s,
           policy_version, decision_code, created_at
    FROM created
)
-- In the caller's transaction (`notify`), pg_notify wakes idle workers at
-- its commit. A create committing alone asks store/wakeups.py instead: a
-- NOTIFY in every create would make them commit one at a time.
SELECT chosen.still_current, c.*
FROM chosen LEFT JOIN (
    created c LEFT JOIN LATERAL (
        SELECT pg_notify('tidings_due', c.channel) WHERE %(notify)s
    ) AS woke ON true
) ON true;

-- name: intent_by_key
SELECT * FROM intents WHERE tenant_id = %(tenant_id)s AND idempotency_key = %(idempotency_key)s;

-- name: intent_by_id
SELECT * FROM intents WHERE tenant_id = %(tenant_id)s AND id = %(id)s;

-- name: transition_many
-- The one way intents change state: each input row is one version-checked
-- move with its audit row and, for the states the application cares about,
-- its announcement, all in one statement. Rows that moved on meanwhile are
-- simply absent from the result (someone else moved first), so one stale
-- intent never costs the others their moves.
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(rows)s::jsonb) AS t (
        tenant_id text, id uuid, version int, from_state text, to_state text, event text,
        terminal bool, actor text, input jsonb, next_due_at timestamptz, lease_owner text,
        lease_expires_at timestamptz, attempts_added int, decision_code text,
        policy_version text, cancel_reason text)
    LIMIT %(count)s  -- the batch's size, for the planner (see attempts_accepted)
), moved AS (
    UPDATE intents i SET
        state = n.to_state,
        version = i.version + 1,
        updated_at = %(now)s,
        next_due_at = CASE WHEN n.to_state IN ('pending', 'resend_due') THEN n.next_due_at END,
        lease_owner = CASE WHEN n.to_state = 'sending' THEN n.lease_owner END,
        lease_expires_at = CASE WHEN n.to_state = 'sending' THEN n.lease_expires_at END,
        -- A claim: its attempt is made at this time, its call starts later
        -- (0047; the unreconciled reads find the oldest call through it).
        claimed_at = CASE WHEN n.to_state = 'sending' THEN %(now)s ELSE i.claimed_at END,
        attempt_count = i.attempt_count + n.attempts_added,
        accepted_at = CASE WHEN n.to_state = 'accepted'
                           THEN coalesce(i.accepted_at, %(now)s) ELSE i.accepted_at END,
        terminal_at = CASE WHEN n.terminal THEN %(now)s ELSE i.terminal_at END,
        decision_code = coalesce(n.decision_code, i.decision_code),
        policy_version = coalesce(n.policy_version, i.policy_version),
        cancel_reason = coalesce(n.cancel_reason, i.cancel_reason)
    FROM input n
    -- A plain join: each input row is one primary-key probe (see
    -- attempts_accepted for why not `= ANY` conditions as well).
    WHERE i.tenant_id = n.tenant_id AND i.id = n.id
      AND i.version = n.version AND i.state = n.from_state
    RETURNING i.*
), audit AS (
    INSERT INTO transitions (tenant_id, intent_id, version, from_state, to_state, event,
                             actor, input, policy_version, decision_code, at)
    SELECT m.tenant_id, m.id, m.version, n.from_state, m.state, n.event, n.actor, n.input,
           m.policy_version, n.decision_code, %(now)s
    FROM moved m JOIN input n ON n.tenant_id = m.tenant_id AND n.id = m.id
), announced AS (
    INSERT INTO events (tenant_id, type, intent_id, job_id, payload, created_at)
    SELECT m.tenant_id, e.type, m.id, m.job_id,
           jsonb_build_object(
               'intent_id', m.id, 'idempotency_key', m.idempotency_key, 'state', m.state,
               'event_class', m.event_class, 'channel', m.channel, 'code', m.decision_code,
               'cancel_reason', m.cancel_reason, 'correlation_id', m.correlation_id,
               'version', m.version, 'at', %(now)s),
           %(now)s
    FROM moved m
    JOIN (VALUES ('delivered', 'intent.delivered'),
                 ('expired', 'intent.expired'),
                 ('expired', 'offer.released'),
                 ('canceled', 'intent.canceled'),
                 ('suppressed', 'intent.suppressed'),
                 ('no_permitted_channel', 'intent.no_permitted_channel'),
                 ('failed', 'intent.failed'),
                 ('unknown', 'intent.unknown')) AS e (state, type)
      ON e.state = m.state
)
SELECT * FROM moved;

-- name: touch_status
-- A status observation's time is a fact about the attempt, not a state
-- change, so it needs no version check (even a canceled intent records it).
UPDATE intents SET last_status_at = greatest(last_status_at, %(at)s)
WHERE tenant_id = %(tenant_id)s AND id = %(id)s;

-- name: provider_retries
-- Retryable provider failures an intent has had so far: each one is a
-- provider_deferred transition in its audit trail.
SELECT count(*) AS count FROM transitions
WHERE tenant_id = %(tenant_id)s AND intent_id = %(intent_id)s AND event = 'provider_deferred';

-- name: heartbeat
-- Rows locked right now (a group's answers being recorded, a cancel) are
-- skipped, not waited for: their move ends or renews the lease anyway, and
-- waiting on them, in whatever order the rows come, deadlocked against the
-- same worker's recording of a group.
-- The outer match is on the primary key: by `id` alone it is a scan of
-- the table for each leased row (docs/benchmarks.md, "Measurements behind
-- the code").
UPDATE intents SET lease_expires_at = %(lease_expires_at)s
WHERE (tenant_id, id) IN (
    SELECT tenant_id, id FROM intents
    WHERE state = 'sending' AND lease_owner = %(owner)s AND id = ANY(%(ids)s)
    FOR UPDATE SKIP LOCKED
);

-- name: quarantine_intent
-- Park one claimable intent the worker could not decode: `failed` with the
-- code UNDECODABLE, audited and announced like any move, and nothing in it
-- read back into Python. A tenant time outside the bounds the database
-- checks (a row written around them) is cleared, so the row passes those
-- checks again; the audit keeps what it was, as text.
WITH old AS (
    SELECT tenant_id, id, state,
           jsonb_build_object('expires_at', expires_at::text, 'not_before', not_before::text,
                              'next_due_at', next_due_at::text) AS was
    FROM intents
    WHERE tenant_id = %(tenant_id)s AND id = %(id)s AND state IN ('pending', 'resend_due')
    FOR UPDATE
), moved AS (
    UPDATE intents i SET
        state = 'failed',
        version = i.version + 1,
        updated_at = %(now)s,
        next_due_at = NULL,
        terminal_at = %(now)s,
        decision_code = 'UNDECODABLE',
        expires_at = CASE WHEN i.expires_at >= '1970-01-01 00:00:00+00'
                           AND i.expires_at < '9000-01-01 00:00:00+00' THEN i.expires_at END,
        not_before = CASE WHEN i.not_before >= '1970-01-01 00:00:00+00'
                           AND i.not_before < '9000-01-01 00:00:00+00' THEN i.not_before END
    FROM old
    WHERE i.tenant_id = old.tenant_id AND i.id = old.id
    RETURNING i.tenant_id, i.id, i.version, i.state, i.job_id, i.idempotency_key,
              i.event_class, i.channel, i.correlation_id, i.policy_version
), audit AS (
    INSERT INTO transitions (tenant_id, intent_id, version, from_state, to_state, event,
                             actor, input, policy_version, decision_code, at)
    SELECT m.tenant_id, m.id, m.version, o.state, m.state, 'quarantined', %(actor)s,
           jsonb_build_object('code', 'UNDECODABLE', 'error', %(error)s::text) || o.was,
           m.policy_version, 'UNDECODABLE', %(now)s
    FROM moved m JOIN old o ON o.tenant_id = m.tenant_id AND o.id = m.id
), announced AS (
    INSERT INTO events (tenant_id, type, intent_id, job_id, payload, created_at)
    SELECT m.tenant_id, 'intent.failed', m.id, m.job_id,
           jsonb_build_object(
               'intent_id', m.id, 'idempotency_key', m.idempotency_key, 'state', m.state,
               'event_class', m.event_class, 'channel', m.channel, 'code', 'UNDECODABLE',
               'cancel_reason', NULL, 'correlation_id', m.correlation_id,
               'version', m.version, 'at', %(now)s),
           %(now)s
    FROM moved m
)
SELECT tenant_id, id FROM moved;

-- name: move_staged_intents
-- Staged rows become intents, each with its creation audit, in one
-- statement; a page replayed after a crash inserts nothing twice.
WITH created AS (
    INSERT INTO intents SELECT * FROM staged_intents
    ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
    RETURNING tenant_id, id, idempotency_key, version, state, policy_version, decision_code,
              created_at, created_by, template_name, template_revision, job_id
), audit AS (
    -- An exclusion decided at preparation carries its decision's inputs.
    INSERT INTO transitions (tenant_id, intent_id, version, from_state, to_state, event, actor,
                             input, policy_version, decision_code, at)
    SELECT c.tenant_id, c.id, c.version, NULL, c.state,
           CASE WHEN c.state = 'pending' THEN 'create' ELSE 'create_excluded' END,
           c.created_by,
           jsonb_strip_nulls(jsonb_build_object(
               'job_id', c.job_id, 'template', c.template_name,
               'template_revision', c.template_revision, 'decision_inputs', s.inputs)),
           c.policy_version, c.decision_code, c.created_at
    FROM created c
    LEFT JOIN jsonb_to_recordset(%(inputs)s::jsonb) AS s (idempotency_key text, inputs jsonb)
           ON s.idempotency_key = c.idempotency_key
), announced AS (
    INSERT INTO events (tenant_id, type, intent_id, job_id, payload, created_at)
    SELECT tenant_id, 'intent.' || state, id, job_id,
           jsonb_build_object('intent_id', id, 'state', state, 'code', decision_code),
           created_at
    FROM created WHERE state <> 'pending'
)
SELECT count(*) AS created FROM created;

-- name: attempts_of
SELECT * FROM attempts WHERE tenant_id = %(tenant_id)s AND intent_id = %(id)s ORDER BY n;

-- name: timeline
-- Everything known about one intent, in the order it happened. The moves
-- are in version order: a cancel reads its time before it waits for a
-- claim to commit, so its later version can carry the earlier time. Each
-- move is placed at the latest time of the moves up to it (`placed`),
-- and the rest of the evidence falls in between by its own time.
SELECT at, kind, from_state, to_state, event, actor, policy_version, detail
FROM (
    SELECT t.at, max(t.at) OVER (ORDER BY t.version) AS placed, 'transition' AS kind,
           t.from_state, t.to_state, t.event, t.actor, t.policy_version,
           jsonb_strip_nulls(jsonb_build_object(
               'version', t.version, 'code', t.decision_code, 'input', t.input)) AS detail,
           0 AS tiebreak, t.version::bigint AS seq
    FROM transitions t
    WHERE t.tenant_id = %(tenant_id)s AND t.intent_id = %(id)s
    UNION ALL
    SELECT a.created_at, a.created_at, 'attempt', NULL, a.state, 'attempt_' || a.n, 'worker',
           NULL,
           jsonb_strip_nulls(jsonb_build_object(
               'n', a.n, 'provider', a.provider, 'provider_message_id', a.provider_message_id,
               'attempt_key', a.attempt_key, 'code', a.code, 'segments', a.segments,
               'encoding', a.encoding, 'accepted_at', a.accepted_at,
               'last_status_at', a.last_status_at)),
           1, a.n
    FROM attempts a
    WHERE a.tenant_id = %(tenant_id)s AND a.intent_id = %(id)s
    UNION ALL
    SELECT coalesce(o.occurred_at, o.received_at), coalesce(o.occurred_at, o.received_at),
           'observation', NULL, o.status,
           o.source, 'provider:' || o.provider, NULL,
           jsonb_strip_nulls(jsonb_build_object(
               'attempt', o.attempt_n, 'raw_status', o.raw_status, 'code', o.code,
               'effect', o.effect, 'received_at', o.received_at)),
           2, o.id
    FROM observations o
    WHERE o.tenant_id = %(tenant_id)s AND o.intent_id = %(id)s
    UNION ALL
    -- What retention took, so a short timeline is never mistaken for a
    -- short history (docs/retention.md).
    -- Row by row (attempts_purged_at), or with its whole month's partitions
    -- (unless its rows were kept apart: its creation is still audited).
    SELECT coalesce(i.attempts_purged_at, m.attempts_dropped_at),
           coalesce(i.attempts_purged_at, m.attempts_dropped_at), 'retention', NULL, NULL,
           'attempt_evidence_purged', 'retention', i.policy_version,
           '{"removed": ["attempts", "transitions", "events"]}'::jsonb, 3, 0
    FROM intents i
    LEFT JOIN evidence_months m
           ON i.id >= m.lower_id AND i.id < m.upper_id AND m.attempts_dropped_at IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM transitions t
                          WHERE t.tenant_id = i.tenant_id AND t.intent_id = i.id)
    WHERE i.tenant_id = %(tenant_id)s AND i.id = %(id)s
      AND coalesce(i.attempts_purged_at, m.attempts_dropped_at) IS NOT NULL
) entries
ORDER BY placed, tiebreak, seq;

-- name: store_upload_destinations
INSERT INTO destinations (tenant_id, destination_hash, channel, ciphertext, country, created_at)
SELECT DISTINCT ON (tenant_id, destination_hash) tenant_id, destination_hash, channel,
       ciphertext, country, %(now)s
FROM (
    SELECT tenant_id, phone_hash AS destination_hash, 'sms' AS channel,
           phone_ciphertext AS ciphertext, phone_country AS country
    FROM audience_upload_members
    WHERE tenant_id = %(tenant_id)s AND upload_id = %(id)s AND phone_hash IS NOT NULL
    UNION ALL
    SELECT tenant_id, email_hash, 'email', email_ciphertext, NULL
    FROM audience_upload_members
    WHERE tenant_id = %(tenant_id)s AND upload_id = %(id)s AND email_hash IS NOT NULL
) staged
ON CONFLICT (tenant_id, destination_hash) DO NOTHING;

-- name: create_staged_destinations
CREATE TEMP TABLE staged_destinations (LIKE destinations) ON COMMIT DROP

-- name: copy_staged_destinations
COPY staged_destinations (tenant_id, destination_hash, channel, ciphertext, country, created_at) FROM STDIN

-- name: store_staged_destinations
INSERT INTO destinations SELECT DISTINCT ON (tenant_id, destination_hash) * FROM staged_destinations ON CONFLICT (tenant_id, destination_hash) DO NOTHING

-- name: drop_staged_destinations
DROP TABLE staged_destinations

-- name: create_staged_intents
CREATE TEMP TABLE staged_intents (LIKE intents INCLUDING DEFAULTS) ON COMMIT DROP

-- name: copy_staged_intents
COPY staged_intents (tenant_id, id, idempotency_key, request_hash, channel, state, recipient_ref, destination_hash, country, timezone, locale, template_name, template_revision, variables, purpose, event_class, job_id, job_seq, policy_version, decision_code, resend_budget, expires_at, next_due_at, created_by, created_at, terminal_at, updated_at, report_id, report_revision) FROM STDIN

-- name: drop_staged_intents
DROP TABLE staged_intents
