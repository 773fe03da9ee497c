-- name: shadow_controls
SELECT tenant_id, channel, country, purpose, event_class, live_percent FROM controls
WHERE kind = 'shadow_mode' AND enabled AND tenant_id = ANY(%(tenants)s);

-- name: set_control
-- A live percent left out (NULL) keeps the stored one (0 for a new
-- control). A smaller one than stored matches no row: the cohort only
-- grows, so nobody once live is shadowed again (store/controls.py).
INSERT INTO controls (tenant_id, kind, channel, country, purpose, event_class,
                      enabled, updated_at, updated_by, live_percent)
VALUES (%(tenant_id)s, %(kind)s, %(channel)s, %(country)s, %(purpose)s, %(event_class)s,
        %(enabled)s, %(now)s, %(actor)s, coalesce(%(live_percent)s::smallint, 0))
ON CONFLICT (tenant_id, kind, channel, country, purpose, event_class)
DO UPDATE SET enabled = EXCLUDED.enabled, updated_at = EXCLUDED.updated_at,
              updated_by = EXCLUDED.updated_by,
              live_percent = coalesce(%(live_percent)s::smallint, controls.live_percent)
WHERE controls.live_percent <= coalesce(%(live_percent)s::smallint, controls.live_percent)
RETURNING live_percent;

-- name: control_live_percent
SELECT live_percent, enabled FROM controls
WHERE tenant_id = %(tenant_id)s AND kind = %(kind)s AND channel = %(channel)s
  AND country = %(country)s AND purpose = %(purpose)s AND event_class = %(event_class)s;

-- name: controls_of
SELECT kind, channel, country, purpose, event_class, enabled, live_percent,
       updated_at, updated_by
FROM controls
WHERE tenant_id = %(tenant_id)s ORDER BY kind, channel, country, purpose, event_class;
