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

-- Suppressions a send-time rejection wrote before this migration kept no
-- evidence, so the ones the old rule wrote (docs/providers.md, migration
-- notes) could not be told from a real non-existent address. Where the
-- attempt that wrote one is still kept (a failed attempt to that
-- destination, settled at the very moment the suppression was written),
-- its provider, intent and attempt are filled in, and as raw status the
-- provider's own answer (0022) or else the attempt's code. Once, at upgrade.
UPDATE suppressions s
SET provider = a.provider, intent_id = a.intent_id, attempt_n = a.n,
    raw_status = left(coalesce(a.response_body, a.code), 200)
FROM intents i
JOIN attempts a ON a.tenant_id = i.tenant_id AND a.intent_id = i.id
WHERE s.reason = 'invalid' AND s.provider IS NULL AND s.intent_id IS NULL
  AND i.tenant_id = s.tenant_id AND i.channel = s.channel
  AND i.destination_hash = s.destination_hash
  AND a.state = 'failed' AND a.terminal_at = s.created_at;

-- A Postmark bounce receipt kept only its record type (`Bounce`) as raw
-- status, so a `Blocked` bounce the old rule took for a hard bounce could
-- not be told from a HardBounce. The bounce's Type, from the receipt kept
-- with the attempt, is added (`Bounce:Blocked`), as receipts now write it.
UPDATE suppressions s
SET raw_status = left(s.raw_status || ':' || (o.raw ->> 'Type'), 200)
FROM observations o
WHERE s.provider = 'postmark' AND s.raw_status = 'Bounce'
  AND o.tenant_id = s.tenant_id AND o.intent_id = s.intent_id AND o.attempt_n = s.attempt_n
  AND o.provider = 'postmark' AND o.raw_status = 'Bounce' AND o.raw ->> 'Type' IS NOT NULL;
