-- One tenant's 429s must not hold a shared provider account for everyone
-- (issue #39, finding 5). Back-off answers are counted per (account,
-- tenant) as well: the tenant whose traffic draws them is held back by an
-- exponential backoff of its own, while the account's pause for everyone
-- is capped (domain/breaker.py, SHARED_MAX_SECONDS).
--
-- A tenant table (distributed by tenant_id on Citus): the claim reads it
-- per candidate intent, by that intent's tenant, so it stays on one shard.
CREATE TABLE provider_backoffs (
    tenant_id   text        NOT NULL,
    account     text        NOT NULL,
    -- Until when this tenant's claims on the account wait.
    held_until  timestamptz NOT NULL,
    -- This tenant's back-off answers in a row on the account.
    failures    integer     NOT NULL DEFAULT 0,
    code        text        NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, account)
);

-- Whose traffic drew the answer that set the account's pause: named in
-- the log and the metric (operators), and to that tenant alone in its
-- alert. Not `tenant_id`: the row is the deployment's (a reference table).
ALTER TABLE provider_pauses ADD COLUMN caused_by text;
