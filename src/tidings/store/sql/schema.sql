-- The declared schema: what every migration applied in order must produce.
-- tests/integration/test_migrations.py holds the two to each other; change
-- both together (a new migration file, and this file).

-- The durable intent ledger: intents, their attempts, observations of what
-- providers say, an append-only audit of every transition, and the events
-- the application reads. Every table carries tenant_id and every primary or
-- unique key starts with it, so the schema distributes unchanged (Citus).

CREATE TABLE tenants (
    tenant_id   text        NOT NULL,
    name        text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id),
    -- A provider account's rate counters are kept under the empty tenant
    -- id, the deployment's (domain/limits.py, LimitKey.counted_for).
    CONSTRAINT tenants_id_not_empty CHECK (tenant_id <> '')
);

-- A destination is stored once, encrypted, and referenced by a keyed hash.
CREATE TABLE destinations (
    tenant_id         text        NOT NULL REFERENCES tenants (tenant_id),
    destination_hash  text        NOT NULL,
    channel           text        NOT NULL CHECK (channel IN ('sms', 'email')),
    ciphertext        bytea       NOT NULL,
    country           text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, destination_hash)
);

CREATE TABLE intents (
    tenant_id         text        NOT NULL REFERENCES tenants (tenant_id),
    id                uuid        NOT NULL,
    idempotency_key   text        NOT NULL,
    request_hash      text        NOT NULL,
    channel           text        NOT NULL CHECK (channel IN ('sms', 'email')),
    state             text        NOT NULL CHECK (state IN (
                          'pending', 'sending', 'accepted', 'resend_due', 'reconciling',
                          'delivered', 'canceled', 'suppressed', 'no_permitted_channel',
                          'failed', 'expired', 'unknown')),
    version           integer     NOT NULL DEFAULT 1 CHECK (version >= 1),
    recipient_ref     text        NOT NULL,
    destination_hash  text,
    country           text,
    timezone          text,
    locale            text,
    template_name     text        NOT NULL,
    template_revision integer,
    variables         jsonb       NOT NULL DEFAULT '{}'::jsonb,
    purpose           text        NOT NULL,
    event_class       text        NOT NULL,
    correlation_id    text,
    job_id            uuid,
    policy_version    text,
    decision_code     text,
    cancel_reason     text,
    resend_budget     integer     NOT NULL DEFAULT 0 CHECK (resend_budget >= 0),
    attempt_count     integer     NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
    expires_at        timestamptz,
    not_before        timestamptz,
    next_due_at       timestamptz,
    lease_owner       text,
    lease_expires_at  timestamptz,
    created_by        text        NOT NULL,
    -- The four ledger timestamps (R002.2, docs/requirements.md): intent created, provider
    -- accepted, last status observed, terminal state observed.
    created_at        timestamptz NOT NULL,
    accepted_at       timestamptz,
    last_status_at    timestamptz,
    terminal_at       timestamptz,
    updated_at        timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, idempotency_key),
    FOREIGN KEY (tenant_id, destination_hash) REFERENCES destinations (tenant_id, destination_hash),
    CHECK ((state = 'sending') = (lease_owner IS NOT NULL))
);

-- Claims walk one channel's due intents in keyset order; only claimable
-- rows are indexed.
CREATE INDEX intents_due ON intents (channel, next_due_at, id)
    WHERE state IN ('pending', 'resend_due');
-- The claim's lanes (sql/fragments/due_lanes.sql): single intents, and
-- each sending job's own, so no lane reads another's backlog.
CREATE INDEX intents_due_single ON intents (channel, tenant_id, next_due_at, id)
    WHERE state IN ('pending', 'resend_due') AND job_id IS NULL;
CREATE INDEX intents_due_job ON intents (tenant_id, job_id, channel, next_due_at, id)
    WHERE state IN ('pending', 'resend_due') AND job_id IS NOT NULL;
CREATE INDEX intents_leases ON intents (lease_expires_at)
    WHERE state = 'sending';
CREATE INDEX intents_deadlines ON intents (expires_at)
    WHERE expires_at IS NOT NULL
      AND state IN ('pending', 'sending', 'accepted', 'resend_due', 'reconciling');
CREATE INDEX intents_job ON intents (tenant_id, job_id, id) WHERE job_id IS NOT NULL;

-- Tenant-supplied times lie in [1970, 9000) UTC, as domain/moments.py
-- checks: outside it a row can be stored but not decoded by Python, and
-- one such row once stopped every tenant's claims (issue #20).
ALTER TABLE intents
    ADD CONSTRAINT intents_expires_at_bounded
        CHECK (expires_at >= '1970-01-01 00:00:00+00' AND expires_at < '9000-01-01 00:00:00+00'),
    ADD CONSTRAINT intents_not_before_bounded
        CHECK (not_before >= '1970-01-01 00:00:00+00' AND not_before < '9000-01-01 00:00:00+00'),
    ADD CONSTRAINT intents_next_due_at_bounded
        CHECK (next_due_at >= '1970-01-01 00:00:00+00' AND next_due_at < '9000-01-01 00:00:00+00');
-- Intents quarantined because a worker could not decode or render them
-- (dispatch/quarantine.py): counted per tenant by the metric and the alert.
CREATE INDEX intents_quarantined ON intents (tenant_id, terminal_at)
    WHERE decision_code IN ('UNDECODABLE', 'UNRENDERABLE');
-- Outcomes that stayed unknown, counted and paged on (migration 0019).
CREATE INDEX intents_unknown ON intents (tenant_id, event_class, channel, terminal_at)
    WHERE state = 'unknown';
-- Deadlines passed with no call made: read from their own rows (0031,
-- issue #38; its intents_open_oldest is intents_listing_state's since 0048).
CREATE INDEX intents_expired_unsent ON intents (tenant_id, event_class)
    WHERE state = 'expired' AND attempt_count = 0;
CREATE INDEX intents_retention_groups ON intents (tenant_id, policy_version, terminal_at)
    WHERE terminal_at IS NOT NULL AND policy_version IS NOT NULL;

-- Partitioned by the intent's id (a UUIDv7: its creation time), one
-- partition per month made ahead by store/evidence_partitions.py, plus a
-- default one for ids outside every month (0026, docs/retention.md).
-- Every key includes intent_id, the partition key.
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
    -- Written right before the provider call goes out (migration 0018):
    -- NULL after a crash means the call never started.
    call_started_at     timestamptz,
    -- The provider's answer to a send it did not accept, redacted and
    -- bounded (migration 0022, providers/response_body.py).
    response_body       text CHECK (octet_length(response_body) <= 2048),
    PRIMARY KEY (tenant_id, intent_id, n),
    FOREIGN KEY (tenant_id, intent_id) REFERENCES intents (tenant_id, id)
) PARTITION BY RANGE (intent_id);
CREATE TABLE attempts_default PARTITION OF attempts DEFAULT;
CREATE INDEX attempts_provider_message ON attempts (provider, provider_message_id)
    WHERE provider_message_id IS NOT NULL;
CREATE INDEX attempts_checks ON attempts (next_check_at)
    WHERE state IN ('sending', 'accepted', 'unknown') AND next_check_at IS NOT NULL;
-- Receipts find their attempt by the reference they echo, which names no
-- tenant (attempts.sql, attempts_by_reference).
CREATE INDEX attempts_key ON attempts (attempt_key);
-- Calls that started and have no provider id yet: what a list search
-- must rule out before it names a message as one attempt's (dispatch/lookup.py).
CREATE INDEX attempts_open_calls ON attempts (provider, call_started_at)
    WHERE provider_message_id IS NULL AND state IN ('sending', 'unknown')
      AND call_started_at IS NOT NULL;

-- What providers told us about an intent's attempts, exactly once per
-- provider event: append-only.
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
    -- The attempt's channel, written with the observation (0037); NULL on
    -- rows older than it but the newest reconciliation one of a channel.
    channel             text,
    PRIMARY KEY (tenant_id, intent_id, id),
    UNIQUE (tenant_id, intent_id, provider, dedupe_key)
) PARTITION BY RANGE (intent_id);
CREATE TABLE observations_default PARTITION OF observations DEFAULT;
-- The newest polled, looked-up or webhook observation of a tenant's
-- channel, read at the end of its range (metrics, alerts, console).
CREATE INDEX observations_reconciled ON observations (tenant_id, channel, received_at)
    WHERE source IN ('poll', 'lookup', 'webhook') AND channel IS NOT NULL;

-- Receipts that match no attempt yet (a webhook racing the send's own
-- commit): kept apart, with no intent, and moved to observations when the
-- attempt's provider id is recorded (0026).
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

-- The audit: one row per version of an intent, written in the same
-- statement as the version-checked update that made it.
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
    -- The transaction that wrote it (0038): the transition audit folds
    -- what committed below pg_snapshot_xmin, never skipping a late commit.
    -- NULL on rows older than 0038, folded once by id.
    txid            xid8        DEFAULT pg_current_xact_id(),
    PRIMARY KEY (tenant_id, id, intent_id),
    UNIQUE (tenant_id, intent_id, version),
    FOREIGN KEY (tenant_id, intent_id) REFERENCES intents (tenant_id, id)
) PARTITION BY RANGE (intent_id);
CREATE TABLE transitions_default PARTITION OF transitions DEFAULT;
-- The console's states-over-time chart walks back from the current counts
-- through the last hour of transitions; without this it scans them all.
CREATE INDEX transitions_recent ON transitions (tenant_id, at);
CREATE INDEX transitions_audit_cursor ON transitions (txid, id);
CREATE INDEX transitions_unaudited ON transitions (id) WHERE txid IS NULL;

-- The transition audit, kept (0038; store/transition_audit.py folds into
-- it, the metrics scrape and the alert round read it). Lease recoveries
-- per tenant since ever, a counter: a purge takes none back.
CREATE TABLE transition_audit (
    tenant_id         text    NOT NULL,
    lease_recoveries  bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id)
);

-- Each audited move the transition table did not allow when folded, read
-- only while its transition is still kept.
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

-- How far the folds went, in (txid, id) order, and through the rows older
-- than 0038 (by id; NULL once all are folded). One row.
CREATE TABLE transition_audit_mark (
    only_row         boolean  NOT NULL DEFAULT true CHECK (only_row),
    folded_txid      xid8     NOT NULL DEFAULT '0',
    folded_id        bigint   NOT NULL DEFAULT 0,
    unaudited_after  bigint   DEFAULT 0,
    PRIMARY KEY (only_row)
);
INSERT INTO transition_audit_mark DEFAULT VALUES;

-- The console chart's transitions per tenant, minute and move, for the
-- last two hours, added by each fold with its mark (0049).
CREATE TABLE transition_minutes (
    tenant_id   text         NOT NULL,
    minute      timestamptz  NOT NULL,
    from_state  text         NOT NULL,  -- '' for a creation
    to_state    text         NOT NULL,
    n           bigint       NOT NULL,
    PRIMARY KEY (tenant_id, minute, from_state, to_state)
);
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

-- Application-facing events. Readers page by (txid, id) and only see rows
-- whose transaction is older than every running one, so a cursor never
-- skips an event that commits late.
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

-- What dispatch needs besides the ledger: immutable template revisions and
-- policy versions, operator controls, and the counters that rate limits
-- consume in the claim transaction.

CREATE TABLE templates (
    tenant_id             text        NOT NULL REFERENCES tenants (tenant_id),
    name                  text        NOT NULL,
    revision              integer     NOT NULL CHECK (revision >= 1),
    channel               text        NOT NULL CHECK (channel IN ('sms', 'email')),
    locale                text        NOT NULL,
    subject               text,
    body                  text        NOT NULL,
    html_body             text,
    required_variables    text[]      NOT NULL DEFAULT '{}',
    attachment_policy     text        NOT NULL DEFAULT 'none'
                              CHECK (attachment_policy IN ('none', 'optional', 'required')),
    provider_template_ids jsonb       NOT NULL DEFAULT '{}'::jsonb,
    content_hash          text        NOT NULL,
    created_at            timestamptz NOT NULL,
    created_by            text        NOT NULL,
    dispatch_variables    text[]      NOT NULL DEFAULT '{}',
    PRIMARY KEY (tenant_id, name, revision)
);

CREATE INDEX templates_lookup ON templates (tenant_id, name, channel, locale, revision DESC);

CREATE TABLE policies (
    tenant_id     text        NOT NULL REFERENCES tenants (tenant_id),
    version       text        NOT NULL,
    name          text        NOT NULL,
    document      jsonb       NOT NULL,
    published_at  timestamptz NOT NULL,
    published_by  text        NOT NULL,
    -- Set for a stored version past the limits (0027): never current.
    quarantine_code text,
    quarantined_at  timestamptz,
    PRIMARY KEY (tenant_id, version)
);

CREATE INDEX policies_current ON policies (tenant_id, published_at DESC);

-- Kill switch and shadow mode. An empty channel, country, purpose or event
-- class covers all.
CREATE TABLE controls (
    tenant_id   text        NOT NULL REFERENCES tenants (tenant_id),
    kind        text        NOT NULL CHECK (kind IN ('kill_switch', 'shadow_mode')),
    channel     text        NOT NULL DEFAULT '',
    country     text        NOT NULL DEFAULT '',
    enabled     boolean     NOT NULL,
    updated_at  timestamptz NOT NULL,
    updated_by  text        NOT NULL,
    -- Scoped by notification purpose and event class too (0041).
    purpose     text        NOT NULL DEFAULT '',
    event_class text        NOT NULL DEFAULT '',
    -- Shadow mode's live cohort (0041, domain/rollout.py): only grows.
    live_percent smallint   NOT NULL DEFAULT 0
        CHECK (live_percent BETWEEN 0 AND 100 AND (kind = 'shadow_mode' OR live_percent = 0)),
    -- When it was last turned on, and off (0041): shadow mode goes on
    -- covering the intents created while it was on (docs/replay.md).
    enabled_at  timestamptz,
    disabled_at timestamptz,
    PRIMARY KEY (tenant_id, kind, channel, country, purpose, event_class)
);

CREATE TABLE rate_counters (
    tenant_id     text        NOT NULL,
    scope         text        NOT NULL,
    key           text        NOT NULL,
    window_start  timestamptz NOT NULL,
    used          integer     NOT NULL,
    PRIMARY KEY (tenant_id, scope, key, window_start)
);

CREATE INDEX rate_counters_age ON rate_counters (window_start);

-- The per-tenant API request rate, shared by every API process: one token
-- bucket per tenant (api/rate_limit.py). `tokens` is the level at
-- `refilled_at`; `granted` is what the last take got.
CREATE TABLE api_rate_buckets (
    tenant_id    text             PRIMARY KEY,
    tokens       double precision NOT NULL,
    refilled_at  timestamptz      NOT NULL,
    granted      integer          NOT NULL
);

-- What the policy needs to know about a recipient: contact details
-- (destinations by keyed hash only), consent evidence, opt-outs and
-- suppressions. Consent is evidence the application records; it is never
-- inferred.

CREATE TABLE contacts (
    tenant_id    text        NOT NULL REFERENCES tenants (tenant_id),
    ref          text        NOT NULL,
    phone_hash   text,
    email_hash   text,
    timezone     text,
    locale       text,
    preferences  jsonb       NOT NULL DEFAULT '{}'::jsonb,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, ref),
    FOREIGN KEY (tenant_id, phone_hash) REFERENCES destinations (tenant_id, destination_hash),
    FOREIGN KEY (tenant_id, email_hash) REFERENCES destinations (tenant_id, destination_hash)
);

CREATE TABLE consents (
    tenant_id     text        NOT NULL REFERENCES tenants (tenant_id),
    id            bigint      GENERATED ALWAYS AS IDENTITY,
    ref           text        NOT NULL,
    channel       text        NOT NULL CHECK (channel IN ('sms', 'email')),
    purpose       text        NOT NULL,
    source        text        NOT NULL,
    captured_at   timestamptz NOT NULL,
    evidence_ref  text,
    revoked_at    timestamptz,
    recorded_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, ref, channel, purpose, captured_at, source)
);

CREATE INDEX consents_lookup ON consents (tenant_id, ref, channel, purpose);
ALTER TABLE consents
    ADD CONSTRAINT consents_captured_at_bounded
        CHECK (captured_at >= '1970-01-01 00:00:00+00' AND captured_at < '9000-01-01 00:00:00+00'),
    ADD CONSTRAINT consents_revoked_at_bounded
        CHECK (revoked_at >= '1970-01-01 00:00:00+00' AND revoked_at < '9000-01-01 00:00:00+00');

-- Keyed by destination: a STOP arrives from a number, not from a contact.
CREATE TABLE opt_outs (
    tenant_id         text        NOT NULL REFERENCES tenants (tenant_id),
    channel           text        NOT NULL CHECK (channel IN ('sms', 'email')),
    destination_hash  text        NOT NULL,
    source            text        NOT NULL,
    created_at        timestamptz NOT NULL,
    -- What a provider said, when a receipt wrote the row (0020).
    provider          text,
    intent_id         uuid,
    attempt_n         integer,
    raw_status        text CHECK (length(raw_status) <= 200),
    PRIMARY KEY (tenant_id, channel, destination_hash)
);

CREATE TABLE suppressions (
    tenant_id         text        NOT NULL REFERENCES tenants (tenant_id),
    channel           text        NOT NULL CHECK (channel IN ('sms', 'email')),
    destination_hash  text        NOT NULL,
    reason            text        NOT NULL
                          CHECK (reason IN ('hard_bounce', 'complaint', 'operator', 'invalid')),
    created_at        timestamptz NOT NULL,
    provider          text,
    intent_id         uuid,
    attempt_n         integer,
    raw_status        text CHECK (length(raw_status) <= 200),
    PRIMARY KEY (tenant_id, channel, destination_hash)
);

-- Frequency caps count one recipient's recent attempts per channel, and
-- bulk cancels by event class or correlation id (0029) never walk all the
-- tenant's intents: both through the listing indexes below (0034) since
-- 0048 merged each pair.

-- Zones an SMS destination may be in, when the caller gave no time zone:
-- a send window must then be open in all of them.
ALTER TABLE intents ADD COLUMN candidate_timezones text[] NOT NULL DEFAULT '{}';

-- API keys, one set per tenant. Only an HMAC-SHA256 of each key is
-- stored, keyed by a key derived from TIDINGS_SECRET_KEY (keys made before
-- were a plain sha256, rehashed on use): the key is 256 bits of
-- randomness, so no slow KDF is needed, and the table alone cannot
-- confirm a guessed key.
CREATE TABLE api_keys (
    tenant_id   text        NOT NULL REFERENCES tenants (tenant_id),
    key_id      text        NOT NULL,
    key_hash    text        NOT NULL,
    scopes      text[]      NOT NULL
                    CHECK (cardinality(scopes) > 0
                           AND scopes <@ ARRAY['send', 'read', 'admin', 'webhook']::text[]),
    name        text        NOT NULL,
    created_at  timestamptz NOT NULL,
    revoked_at  timestamptz,
    expires_at  timestamptz
                    CHECK (expires_at >= '1970-01-01 00:00:00+00'
                           AND expires_at < '9000-01-01 00:00:00+00'),
    PRIMARY KEY (tenant_id, key_id),
    UNIQUE (tenant_id, key_hash)
);

-- A request names no tenant, only its key: authentication looks the key up
-- by hash across tenants. Not unique (keys must start with tenant_id);
-- 256 random bits make a collision moot. Revoked and expired keys are
-- found too, so a client is told why its key stopped working.
CREATE INDEX api_keys_by_hash ON api_keys (key_hash);

-- A key minted through the API by another key names it, its parent: it
-- expires no later than its parent, and revoking a key revokes every key
-- below it (migration 0029). Operators' keys have no parent.
ALTER TABLE api_keys ADD COLUMN parent_key_id text;
CREATE INDEX api_keys_children ON api_keys (tenant_id, parent_key_id)
    WHERE parent_key_id IS NOT NULL;

-- A console session: only a sha256 of its random id is stored, so a read
-- of this table cannot sign anyone in. Scopes are read from the key at
-- each request; revoking the key deletes its sessions (and the lookup
-- ignores sessions of a revoked or expired key anyway).
CREATE TABLE console_sessions (
    tenant_id    text        NOT NULL,
    session_hash text        NOT NULL,
    key_id       text        NOT NULL,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL
                     CHECK (expires_at >= '1970-01-01 00:00:00+00'
                            AND expires_at < '9000-01-01 00:00:00+00'),
    PRIMARY KEY (tenant_id, session_hash),
    FOREIGN KEY (tenant_id, key_id) REFERENCES api_keys (tenant_id, key_id) ON DELETE CASCADE
);
-- A cookie names no tenant: looked up by hash across tenants, as API keys.
CREATE INDEX console_sessions_by_hash ON console_sessions (session_hash);
CREATE INDEX console_sessions_of_key ON console_sessions (tenant_id, key_id);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);

-- Bulk jobs: a frozen audience, each recipient resolved to a channel (or a
-- terminal exclusion) and turned into intents. Reports are durable objects
-- referenced by id and revision; attempts attach them at send time.

CREATE TABLE reports (
    tenant_id     text        NOT NULL REFERENCES tenants (tenant_id),
    id            text        NOT NULL,
    revision      integer     NOT NULL CHECK (revision >= 1),
    filename      text        NOT NULL,
    content_type  text        NOT NULL,
    location      text        NOT NULL,
    size_bytes    bigint,
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id, revision)
);

CREATE TABLE jobs (
    tenant_id            text        NOT NULL REFERENCES tenants (tenant_id),
    id                   uuid        NOT NULL,
    idempotency_key      text        NOT NULL,
    request_hash         text        NOT NULL,
    event_class          text        NOT NULL,
    event_reason         text,
    purpose              text        NOT NULL,
    template_name        text        NOT NULL,
    template_revisions   jsonb       NOT NULL,
    channels             text[]      NOT NULL,
    channel_mode         text        NOT NULL CHECK (channel_mode IN ('preferred', 'all', 'first_available')),
    variables            jsonb       NOT NULL DEFAULT '{}'::jsonb,
    policy_version       text        NOT NULL,
    audience_version     text        NOT NULL,
    audience_size        integer     NOT NULL,
    report_id            text,
    report_revision      integer,
    token_ttl_seconds    integer,
    expires_at           timestamptz,
    evidence_expires_at  timestamptz,
    status               text        NOT NULL CHECK (status IN (
                             'preparing', 'dispatching', 'complete', 'complete_with_failures')),
    final_counts         jsonb,
    prepared_through     integer     NOT NULL DEFAULT 0,
    created_by           text        NOT NULL,
    created_at           timestamptz NOT NULL,
    prepared_at          timestamptz,
    updated_at           timestamptz NOT NULL,
    -- Set when its preparation failed on its own rows or policy (0027).
    quarantine_code      text,
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, idempotency_key),
    FOREIGN KEY (tenant_id, report_id, report_revision) REFERENCES reports (tenant_id, id, revision)
);

-- The jobs sending now: the claim's bulk lanes.
CREATE INDEX jobs_sending ON jobs (tenant_id, id)
    WHERE status IN ('preparing', 'dispatching');

CREATE INDEX jobs_preparing ON jobs (created_at) WHERE status = 'preparing';
ALTER TABLE jobs
    ADD CONSTRAINT jobs_expires_at_bounded
        CHECK (expires_at >= '1970-01-01 00:00:00+00' AND expires_at < '9000-01-01 00:00:00+00');

-- The frozen audience: one row per recipient, in keyset order (seq).
CREATE TABLE job_recipients (
    tenant_id      text        NOT NULL,
    job_id         uuid        NOT NULL,
    seq            integer     NOT NULL,
    recipient_ref  text        NOT NULL,
    phone_hash     text,
    email_hash     text,
    phone_country  text,
    email_country  text,
    timezone       text,
    locale         text,
    preferences    text[]      NOT NULL DEFAULT '{}',
    variables      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    PRIMARY KEY (tenant_id, job_id, seq),
    UNIQUE (tenant_id, job_id, recipient_ref),
    FOREIGN KEY (tenant_id, job_id) REFERENCES jobs (tenant_id, id)
);

ALTER TABLE intents ADD COLUMN job_seq integer;
ALTER TABLE intents ADD COLUMN report_id text;
ALTER TABLE intents ADD COLUMN report_revision integer;

CREATE INDEX intents_job_recipients ON intents (tenant_id, job_id, job_seq, channel)
    WHERE job_id IS NOT NULL;

-- Operator alerts (R002.1, docs/requirements.md): opened by the sweeper when a condition holds
-- (unreconciled backlog past its objective, an expanding due backlog, an
-- impossible transition), updated while it holds, resolved when it clears.
-- Rows are kept after resolution: they are the incident history. The
-- notification columns make webhook delivery durable and at-least-once.
CREATE TABLE alerts (
    tenant_id             text        NOT NULL REFERENCES tenants (tenant_id),
    id                    uuid        NOT NULL,
    key                   text        NOT NULL,
    condition             text        NOT NULL,
    severity              text        NOT NULL CHECK (severity IN ('warning', 'page')),
    summary               text        NOT NULL,
    details               jsonb       NOT NULL DEFAULT '{}'::jsonb,
    opened_at             timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL,
    resolved_at           timestamptz,
    -- The severity last announced as open (NULL: the opening is not
    -- announced yet), so an escalation to page is announced too.
    notified_severity     text        CHECK (notified_severity IN ('warning', 'page')),
    resolved_notified_at  timestamptz,
    notify_failures       integer     NOT NULL DEFAULT 0,
    notify_after          timestamptz,
    PRIMARY KEY (tenant_id, id)
);

-- At most one open alert per condition and scope; resolved ones are history.
CREATE UNIQUE INDEX alerts_open ON alerts (tenant_id, key) WHERE resolved_at IS NULL;
CREATE INDEX alerts_recent ON alerts (tenant_id, opened_at DESC);

-- When the alert conditions were last evaluated, across every worker, so
-- that N workers scan the ledger once an interval between them.
CREATE TABLE alert_rounds (
    scope   text        PRIMARY KEY,
    last_at timestamptz NOT NULL
);
-- The last round's cost: the next waits many times as long (0012).
ALTER TABLE alert_rounds ADD COLUMN took_seconds double precision NOT NULL DEFAULT 0;

-- Application-facing events pushed to a tenant's endpoint, signed, in
-- order, at least once: the cursor moves only after a 2xx. The secret is
-- stored encrypted, like destinations.

CREATE TABLE event_webhooks (
    tenant_id          text        NOT NULL REFERENCES tenants (tenant_id),
    url                text        NOT NULL,
    secret_ciphertext  bytea       NOT NULL,
    cursor_txid        xid8        NOT NULL DEFAULT '0',
    cursor_id          bigint      NOT NULL DEFAULT 0,
    failures           integer     NOT NULL DEFAULT 0,
    next_attempt_at    timestamptz NOT NULL,
    last_error         text,
    last_delivered_at  timestamptz,
    updated_at         timestamptz NOT NULL,
    PRIMARY KEY (tenant_id)
);

CREATE INDEX event_webhooks_due ON event_webhooks (next_attempt_at);

-- Uploaded audiences: a large audience streamed in before the job that
-- uses it (POST /v1/audiences), so no process ever holds it whole. Members
-- carry destinations only encrypted, named by their keyed hash, exactly as
-- `destinations` does; a job copies them into its frozen audience with one
-- INSERT ... SELECT and consumes the upload. Unused or not, an upload is
-- deleted with its members once it expires.

CREATE TABLE audience_uploads (
    tenant_id    text        NOT NULL REFERENCES tenants (tenant_id),
    id           uuid        NOT NULL,
    size         integer     NOT NULL,
    version      text        NOT NULL,
    created_by   text        NOT NULL,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    -- Set when a job froze it; an upload serves one job.
    job_id       uuid,
    consumed_at  timestamptz,
    PRIMARY KEY (tenant_id, id)
);

CREATE INDEX audience_uploads_expiry ON audience_uploads (expires_at);

-- seq is the member's position in the upload (its line), so an error found
-- after the rows are in (a ref seen twice) can still name the line. Refs
-- are not unique here for that reason; the job's frozen audience is.
CREATE TABLE audience_upload_members (
    tenant_id         text    NOT NULL,
    upload_id         uuid    NOT NULL,
    seq               integer NOT NULL,
    recipient_ref     text    NOT NULL,
    phone_hash        text,
    phone_ciphertext  bytea,
    phone_country     text,
    email_hash        text,
    email_ciphertext  bytea,
    timezone          text,
    locale            text,
    preferences       text[]  NOT NULL DEFAULT '{}',
    variables         jsonb   NOT NULL DEFAULT '{}'::jsonb,
    PRIMARY KEY (tenant_id, upload_id, seq),
    FOREIGN KEY (tenant_id, upload_id) REFERENCES audience_uploads (tenant_id, id)
        ON DELETE CASCADE,
    CHECK ((phone_hash IS NULL) = (phone_ciphertext IS NULL)),
    CHECK ((email_hash IS NULL) = (email_ciphertext IS NULL))
);

-- Provider accounts that said "back off", paused for every worker (0021).
-- A reference table: an account carries every tenant's messages.
CREATE TABLE provider_pauses (
    account       text        PRIMARY KEY,
    paused_until  timestamptz NOT NULL,
    failures      integer     NOT NULL DEFAULT 0,
    code          text        NOT NULL,
    updated_at    timestamptz NOT NULL
);

-- Retention's four clocks (0024, docs/retention.md). attempts_purged_at: when
-- retention took an intent's attempts, transitions and events; the recipient
-- decision stays until its own clock. The job keeps its final counts and
-- cost, served after its intents go, until facts_expire_at.
ALTER TABLE intents ADD COLUMN attempts_purged_at timestamptz;
ALTER TABLE jobs
    ADD COLUMN final_counts_by_channel jsonb,
    ADD COLUMN final_cost jsonb,
    ADD COLUMN facts_expire_at timestamptz;
CREATE INDEX intents_attempts_kept ON intents (tenant_id, policy_version, id)
    WHERE terminal_at IS NOT NULL AND attempts_purged_at IS NULL;
-- The shadow-rollout report's decisions (0025, shadow.sql).
CREATE INDEX intents_shadow ON intents (tenant_id, id) WHERE decision_code = 'SHADOW_MODE';
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
        -- The same evidence in another partition: the count triggers skip it.
        PERFORM set_config('tidings.evidence_moving', 'on', true);
        EXECUTE format('INSERT INTO %I OVERRIDING SYSTEM VALUE SELECT * FROM evidence_kept',
                       p_parent);
        PERFORM set_config('tidings.evidence_moving', 'off', true);
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

-- The first number of a policy document past its limit, as the parser
-- names it (`retry.max_seconds`, `frequency_caps[0].limit`); NULL when
-- none is. The same limits as domain/policy_bounds.py (a test compares
-- the two). Only numbers are judged: a value of another type is the
-- parser's to refuse, and the loops quarantine a document it refuses.
CREATE FUNCTION policy_out_of_bounds(doc jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    WITH limits (path, value, top) AS (
        SELECT 'resend_budget', doc -> 'resend_budget', 10::numeric
        UNION ALL
        SELECT g.name || '.' || l.key, doc -> g.name -> l.key, l.top
        FROM (VALUES ('poll_schedule', 'first_check_after_seconds', 31622400),
                     ('poll_schedule', 'factor', 10),
                     ('poll_schedule', 'max_interval_seconds', 31622400),
                     ('poll_schedule', 'max_checks', 1000),
                     ('poll_schedule', 'give_up_after_seconds', 31622400),
                     ('retry', 'base_seconds', 31622400),
                     ('retry', 'max_seconds', 31622400),
                     ('retry', 'max_failures', 1000),
                     ('retry', 'max_pending_seconds', 31622400),
                     ('retention', 'recipient_evidence_days', 36525),
                     ('retention', 'attempt_evidence_days', 36525),
                     ('retention', 'observation_days', 36525),
                     ('retention', 'job_facts_days', 36525)) AS l (grp, key, top)
        JOIN (VALUES ('poll_schedule'), ('retry'), ('retention')) AS g (name) ON g.name = l.grp
        UNION ALL
        SELECT format('%s[%s].%s', lists.name, item.n - 1, l.key), item.value -> l.key, l.top
        FROM (VALUES ('frequency_caps'), ('rate_limits')) AS lists (name)
        CROSS JOIN LATERAL jsonb_array_elements(
            CASE WHEN jsonb_typeof(doc -> lists.name) = 'array' THEN doc -> lists.name
                 ELSE '[]'::jsonb END) WITH ORDINALITY AS item (value, n)
        CROSS JOIN (VALUES ('limit', 1000000000), ('per_seconds', 31622400)) AS l (key, top)
        WHERE jsonb_typeof(item.value) = 'object'
        UNION ALL
        SELECT format('country_spend_limits.%s.%s.%s', ch.key, co.key, l.key), co.value -> l.key,
               l.top
        FROM jsonb_each(CASE WHEN jsonb_typeof(doc -> 'country_spend_limits') = 'object'
                             THEN doc -> 'country_spend_limits' ELSE '{}'::jsonb END) AS ch
        CROSS JOIN LATERAL jsonb_each(CASE WHEN jsonb_typeof(ch.value) = 'object'
                                           THEN ch.value ELSE '{}'::jsonb END) AS co
        CROSS JOIN (VALUES ('segments', 1000000000), ('per_seconds', 31622400)) AS l (key, top)
        WHERE jsonb_typeof(co.value) = 'object'
    )
    SELECT path FROM limits
    WHERE jsonb_typeof(value) = 'number' AND (value #>> '{}')::numeric > top
    ORDER BY path LIMIT 1
$$;

-- What a shared loop (lease recovery, recording, job preparation, alert
-- evaluation, the purge, event pushes) could not handle for one tenant and
-- set aside so it could go on for everyone else: counted and alerted per
-- tenant (the `quarantined` alert). `error` is the kind of error only, never
-- its message, which may quote a tenant's value.
CREATE TABLE quarantine_log (
    tenant_id   text        NOT NULL,
    id          bigint      GENERATED ALWAYS AS IDENTITY,
    loop        text        NOT NULL,
    subject     text        NOT NULL,
    code        text        NOT NULL,
    error       text        NOT NULL,
    at          timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX quarantine_log_recent ON quarantine_log (at);

-- Back-off answers per (account, tenant) (0028): the tenant whose traffic
-- draws 429s is held back by itself; the account's shared pause is capped.
CREATE TABLE provider_backoffs (
    tenant_id   text        NOT NULL,
    account     text        NOT NULL,
    held_until  timestamptz NOT NULL,
    failures    integer     NOT NULL DEFAULT 0,
    code        text        NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, account)
);
ALTER TABLE provider_pauses ADD COLUMN caused_by text;

-- Issue 38: a job's numbers, kept (migrations/0033_job_counts.sql; its stripes and early
-- exits from 0045, the evidence move from 0046).
CREATE TABLE job_counts (
    tenant_id        text        NOT NULL,
    job_id           uuid        NOT NULL,
    stripe           smallint    NOT NULL CHECK (stripe >= 0 AND stripe < 64),
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

CREATE FUNCTION job_counts_add(deltas jsonb) RETURNS void LANGUAGE sql AS $$
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

-- Intents written: one more in its state and code, and its bytes.
CREATE FUNCTION job_counts_intents_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- Intents moved: one less where each was, one more where it is.
CREATE FUNCTION job_counts_intents_updated() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- Attempts made: per channel, the attempt, whether it is a retry (n > 1),
-- its segments and whether it reached the provider, and its bytes.
-- Whether any of these tenants has a job: if none does, no row of theirs
-- is a job's, and no intent needs looking up. Rows a month's drop moves to
-- the default partitions (evidence_month_drop) are evidence already
-- counted: while they move, nothing is counted again.
CREATE FUNCTION job_counts_tenants_have_jobs(tenants text[]) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce(current_setting('tidings.evidence_moving', true), '') <> 'on'
       AND EXISTS (SELECT 1 FROM jobs j WHERE j.tenant_id = ANY(tenants))
$$;

CREATE FUNCTION job_counts_attempts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- Attempts settled: segments counted and acceptance recorded after the insert.
CREATE FUNCTION job_counts_attempts_updated() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- Evidence written about a job's intents (transitions, receipts): its bytes.
CREATE FUNCTION job_counts_evidence_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- The frozen audience: the job's own facts, under channel ''.
CREATE FUNCTION job_counts_recipients_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE TRIGGER job_counts_attempts_deleted AFTER DELETE ON attempts
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION job_counts_attempts_deleted();
-- Finding intents (0034, docs/finding.md): newest first by (created_at, id),
-- one index per leading filter, so a page costs a page. Since 0048 they
-- serve the older readers of the same leading columns too: recent_sends,
-- bulk cancels in (created_at, id) order, the console's oldest open intents.
CREATE INDEX intents_listing ON intents (tenant_id, created_at, id);
CREATE INDEX intents_listing_recipient ON intents (tenant_id, recipient_ref, created_at, id);
CREATE INDEX intents_listing_event_class ON intents (tenant_id, event_class, created_at, id);
-- Only the unfinished states: most intents are finished, and an index led
-- by every state was taken for a bulk cancel's count of finished intents,
-- a read of the tenant's whole history (tests/security/test_bulk_cancel_cost.py).
-- A finished state is listed through intents_listing, filtered.
CREATE INDEX intents_listing_state ON intents (tenant_id, state, created_at, id)
    WHERE state IN ('pending', 'sending', 'accepted', 'resend_due', 'reconciling');
CREATE INDEX intents_listing_correlation ON intents (tenant_id, correlation_id, created_at, id)
    WHERE correlation_id IS NOT NULL;

-- Suppressions reviewed and lifted (0035, issue #37 item 5): an id an
-- operator names, listing indexes, and the lifts with who, when and why.
ALTER TABLE suppressions ADD COLUMN id uuid NOT NULL DEFAULT gen_random_uuid();
CREATE UNIQUE INDEX suppressions_id ON suppressions (tenant_id, id);
CREATE INDEX suppressions_listing ON suppressions (tenant_id, created_at, id);
CREATE INDEX suppressions_listing_reason ON suppressions (tenant_id, reason, created_at, id);
CREATE INDEX suppressions_listing_provider ON suppressions (tenant_id, provider, created_at, id)
    WHERE provider IS NOT NULL;
-- A job's page reads the blocks of its recipients' destinations, on any
-- channel (jobs.sql, blocks_for_page): the key leads with the channel, so
-- without this index that read walked all the tenant's suppressions.
CREATE INDEX suppressions_destination ON suppressions (tenant_id, destination_hash);

CREATE TABLE suppression_lifts (
    tenant_id         text        NOT NULL REFERENCES tenants (tenant_id),
    id                uuid        NOT NULL,
    channel           text        NOT NULL,
    destination_hash  text        NOT NULL,
    reason            text        NOT NULL,
    created_at        timestamptz NOT NULL,
    provider          text,
    intent_id         uuid,
    attempt_n         integer,
    raw_status        text,
    lifted_at         timestamptz NOT NULL,
    lifted_by         text        NOT NULL CHECK (length(lifted_by) <= 200),
    lift_reason       text        NOT NULL CHECK (length(lift_reason) BETWEEN 1 AND 500),
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX suppression_lifts_listing ON suppression_lifts (tenant_id, created_at, id);

-- The request edge's hourly volume (0036, domain/request_limits.py): the
-- anomaly alert reads a day of these rows, never the claims' counters.
CREATE INDEX rate_counters_request_volume ON rate_counters (window_start)
    WHERE scope = 'request_volume';

-- Issue #37: the provider_refused alert reads the window's refusals of our
-- request, sender or account (0039, alert_scans.sql alert_provider_refused).
CREATE INDEX attempts_refused ON attempts (terminal_at)
    WHERE state = 'failed'
      AND code IN ('REQUEST_INVALID', 'SENDER_REJECTED', 'ACCOUNT_RESTRICTED');

-- Issue #41 item 2: synthetic canaries' answers, apart from member traffic
-- (0042, providers/canary_targets.py). A reference table.
CREATE TABLE canary_results (
    account  text        NOT NULL,
    channel  text        NOT NULL,
    at       timestamptz NOT NULL,
    target   text        NOT NULL,
    ok       boolean     NOT NULL,
    code     text        NOT NULL,
    answer   text        NOT NULL DEFAULT '' CHECK (length(answer) <= 1000),
    PRIMARY KEY (account, channel, at)
);
CREATE INDEX canary_results_recent ON canary_results (at);

-- Issue 38: a tenant's intents by key, kept (migrations/0043_intent_counts.sql).
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

-- Issue 41: a counter's window end, for retention (0044_rate_counter_ends.sql).
ALTER TABLE rate_counters ADD COLUMN window_end timestamptz NOT NULL;
CREATE INDEX rate_counters_ended ON rate_counters (window_end);

-- Issue 38, item 4: the oldest intent in flight per tenant, event class and
-- channel, by its latest claim (0047_unreconciled_oldest.sql).
ALTER TABLE intents ADD COLUMN claimed_at timestamptz;
CREATE INDEX intents_unreconciled ON intents
    (tenant_id, event_class, channel, (coalesce(claimed_at, created_at)))
    WHERE state IN ('sending', 'accepted', 'reconciling');
