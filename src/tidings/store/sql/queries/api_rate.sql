-- name: take_api_tokens
-- Refill the tenant's bucket by the time since its last take (never above
-- the burst; a clock behind the last take adds nothing), then take up to
-- `want` whole tokens. One statement, atomic under concurrent takes from
-- any number of API processes. `granted` 0 means empty; `tokens` is then
-- what is left, for the caller's Retry-After.
INSERT INTO api_rate_buckets AS b (tenant_id, tokens, refilled_at, granted)
VALUES (%(tenant_id)s, %(burst)s - %(want)s, %(now)s, %(want)s)
ON CONFLICT (tenant_id) DO UPDATE SET
    granted = least(%(want)s, floor(least(%(burst)s::float8,
        b.tokens + %(rate)s::float8 * greatest(0, extract(epoch FROM %(now)s - b.refilled_at))))),
    tokens = least(%(burst)s::float8,
        b.tokens + %(rate)s::float8 * greatest(0, extract(epoch FROM %(now)s - b.refilled_at)))
        - least(%(want)s, floor(least(%(burst)s::float8,
        b.tokens + %(rate)s::float8 * greatest(0, extract(epoch FROM %(now)s - b.refilled_at))))),
    refilled_at = greatest(b.refilled_at, %(now)s)
RETURNING granted, tokens;
