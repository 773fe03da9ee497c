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

-- name: wake_workers
-- The waker's NOTIFY (store/wakeups.py), a transaction of its own that
-- writes nothing else: its commit need not wait for the WAL to reach disk
-- (a wake-up lost in a crash costs latency, never an intent), so the
-- notification queue's lock is held for as short a time as it can be.
SELECT set_config('synchronous_commit', 'off', true), pg_notify('tidings_due', c)
FROM unnest(%(channels)s::text[]) AS c;

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
