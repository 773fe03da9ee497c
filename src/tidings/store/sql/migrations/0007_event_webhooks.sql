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
