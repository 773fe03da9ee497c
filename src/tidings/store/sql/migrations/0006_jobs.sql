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
    channel_mode         text        NOT NULL CHECK (channel_mode IN ('preferred', 'all')),
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
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, idempotency_key),
    FOREIGN KEY (tenant_id, report_id, report_revision) REFERENCES reports (tenant_id, id, revision)
);

CREATE INDEX jobs_preparing ON jobs (created_at) WHERE status = 'preparing';

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
