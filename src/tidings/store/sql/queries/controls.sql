-- name: shadow_controls
-- Shadow mode on, or once on: a control turned off still covers the
-- intents created while it was on (domain/rollout.py).
SELECT tenant_id, channel, country, purpose, event_class, live_percent,
       enabled, enabled_at, disabled_at
FROM controls
WHERE kind = 'shadow_mode' AND tenant_id = ANY(%(tenants)s)
  AND (enabled OR (enabled_at IS NOT NULL AND disabled_at > enabled_at));

-- name: set_control
-- A live percent left out (NULL) keeps the stored one (0 for a new
-- control). A smaller one than stored matches no row: the cohort only
-- grows, so nobody once live is shadowed again (store/controls.py).
-- Turning it on or off stamps enabled_at or disabled_at; setting it as it
-- is leaves them.
INSERT INTO controls (tenant_id, kind, channel, country, purpose, event_class,
                      enabled, updated_at, updated_by, live_percent, enabled_at)
VALUES (%(tenant_id)s, %(kind)s, %(channel)s, %(country)s, %(purpose)s, %(event_class)s,
        %(enabled)s, %(now)s, %(actor)s, coalesce(%(live_percent)s::smallint, 0),
        CASE WHEN %(enabled)s THEN %(now)s::timestamptz END)
ON CONFLICT (tenant_id, kind, channel, country, purpose, event_class)
DO UPDATE SET enabled = EXCLUDED.enabled, updated_at = EXCLUDED.updated_at,
              updated_by = EXCLUDED.updated_by,
              live_percent = coalesce(%(live_percent)s::smallint, controls.live_percent),
              enabled_at = CASE WHEN EXCLUDED.enabled AND NOT controls.enabled
                                THEN EXCLUDED.updated_at ELSE controls.enabled_at END,
              disabled_at = CASE WHEN controls.enabled AND NOT EXCLUDED.enabled
                                 THEN EXCLUDED.updated_at ELSE controls.disabled_at END
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
