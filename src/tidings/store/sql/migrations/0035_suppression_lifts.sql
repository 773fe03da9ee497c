-- Issue #37, item 5: suppressions are reviewed and lifted by an operator
-- (docs/providers.md, "Reviewing and lifting suppressions"). Each
-- suppression gets an id an operator can name; a lift moves the row, with
-- its evidence, to suppression_lifts and records who lifted it, when and
-- why, in the same statement (contacts.sql, lift_suppression). The address
-- is then sendable again, and a later fact about it suppresses it anew,
-- under a new id.
ALTER TABLE suppressions ADD COLUMN id uuid NOT NULL DEFAULT gen_random_uuid();
CREATE UNIQUE INDEX suppressions_id ON suppressions (tenant_id, id);
-- GET /v1/suppressions, newest first by (created_at, id), led by the
-- filter given: a page reads about a page of index entries.
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
    -- The suppression as it was, evidence included.
    channel           text        NOT NULL,
    destination_hash  text        NOT NULL,
    reason            text        NOT NULL,
    created_at        timestamptz NOT NULL,
    provider          text,
    intent_id         uuid,
    attempt_n         integer,
    raw_status        text,
    -- The lift: who (an API key's actor, `cli`, `library`), when and why.
    lifted_at         timestamptz NOT NULL,
    lifted_by         text        NOT NULL CHECK (length(lifted_by) <= 200),
    lift_reason       text        NOT NULL CHECK (length(lift_reason) BETWEEN 1 AND 500),
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX suppression_lifts_listing ON suppression_lifts (tenant_id, created_at, id);
