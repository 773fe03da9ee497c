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

-- Keyed by destination: a STOP arrives from a number, not from a contact.
CREATE TABLE opt_outs (
    tenant_id         text        NOT NULL REFERENCES tenants (tenant_id),
    channel           text        NOT NULL CHECK (channel IN ('sms', 'email')),
    destination_hash  text        NOT NULL,
    source            text        NOT NULL,
    created_at        timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, channel, destination_hash)
);

CREATE TABLE suppressions (
    tenant_id         text        NOT NULL REFERENCES tenants (tenant_id),
    channel           text        NOT NULL CHECK (channel IN ('sms', 'email')),
    destination_hash  text        NOT NULL,
    reason            text        NOT NULL
                          CHECK (reason IN ('hard_bounce', 'complaint', 'operator', 'invalid')),
    created_at        timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, channel, destination_hash)
);

-- Frequency caps count one recipient's recent attempts per channel.
CREATE INDEX intents_recipient ON intents (tenant_id, recipient_ref, channel);

-- Zones an SMS destination may be in, when the caller gave no time zone:
-- a send window must then be open in all of them.
ALTER TABLE intents ADD COLUMN candidate_timezones text[] NOT NULL DEFAULT '{}';
