-- Operator alerts (seed 002): opened by the sweeper when a condition holds
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

-- The console's states-over-time chart walks back from the current counts
-- through the last hour of transitions; without this it scans them all.
CREATE INDEX transitions_recent ON transitions (tenant_id, at);
