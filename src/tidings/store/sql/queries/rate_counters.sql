-- name: consume_allowance
-- One counter per limit key and fixed window; zero rows back: no room.
INSERT INTO rate_counters (tenant_id, scope, key, window_start, window_end, used)
VALUES (%(tenant_id)s, %(scope)s, %(key)s, %(window_start)s, %(window_end)s, %(cost)s)
ON CONFLICT (tenant_id, scope, key, window_start)
DO UPDATE SET used = rate_counters.used + EXCLUDED.used
WHERE rate_counters.used + EXCLUDED.used <= %(limit)s
RETURNING used;
