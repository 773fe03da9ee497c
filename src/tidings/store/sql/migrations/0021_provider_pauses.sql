-- A provider account that says "back off" (a 429, or a storm of 5xx
-- answers and timeouts) is paused for every worker: claims for that
-- account wait until paused_until, other accounts and channels go on.
-- An account belongs to the deployment, not to a tenant (one account
-- carries every tenant's messages), so this is a reference table keyed by
-- the account alone, like alert_rounds (docs/scaling.md).
CREATE TABLE provider_pauses (
    account       text        PRIMARY KEY,
    paused_until  timestamptz NOT NULL,
    -- Back-off answers in a row: the next pause without Retry-After doubles.
    failures      integer     NOT NULL DEFAULT 0,
    code          text        NOT NULL,
    updated_at    timestamptz NOT NULL
);
