-- The per-tenant API request rate, shared by every API process: one token
-- bucket row per tenant (api/rate_limit.py). `tokens` is the level at
-- `refilled_at`; each take refills it by the time since, then takes up to
-- what was asked. `granted` is what the last take got, since RETURNING
-- sees only the new row.
CREATE TABLE api_rate_buckets (
    tenant_id    text             PRIMARY KEY,
    tokens       double precision NOT NULL,
    refilled_at  timestamptz      NOT NULL,
    granted      integer          NOT NULL
);
