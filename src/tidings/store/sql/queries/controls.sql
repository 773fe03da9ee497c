-- name: shadow_controls
SELECT tenant_id, channel, country, purpose, event_class FROM controls
WHERE kind = 'shadow_mode' AND enabled AND tenant_id = ANY(%(tenants)s);

-- name: set_control
INSERT INTO controls (tenant_id, kind, channel, country, purpose, event_class,
                      enabled, updated_at, updated_by)
VALUES (%(tenant_id)s, %(kind)s, %(channel)s, %(country)s, %(purpose)s, %(event_class)s,
        %(enabled)s, %(now)s, %(actor)s)
ON CONFLICT (tenant_id, kind, channel, country, purpose, event_class)
DO UPDATE SET enabled = EXCLUDED.enabled, updated_at = EXCLUDED.updated_at,
              updated_by = EXCLUDED.updated_by;

-- name: controls_of
SELECT kind, channel, country, purpose, event_class, enabled, updated_at, updated_by
FROM controls
WHERE tenant_id = %(tenant_id)s ORDER BY kind, channel, country, purpose, event_class;
