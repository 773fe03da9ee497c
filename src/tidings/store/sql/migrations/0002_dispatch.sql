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
    PRIMARY KEY (tenant_id, version)
);

CREATE INDEX policies_current ON policies (tenant_id, published_at DESC);

-- Kill switch and shadow mode. An empty channel or country covers all.
CREATE TABLE controls (
    tenant_id   text        NOT NULL REFERENCES tenants (tenant_id),
    kind        text        NOT NULL CHECK (kind IN ('kill_switch', 'shadow_mode')),
    channel     text        NOT NULL DEFAULT '',
    country     text        NOT NULL DEFAULT '',
    enabled     boolean     NOT NULL,
    updated_at  timestamptz NOT NULL,
    updated_by  text        NOT NULL,
    PRIMARY KEY (tenant_id, kind, channel, country)
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
