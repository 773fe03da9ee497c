-- name: set_event_webhook
-- A new or changed endpoint starts after the newest event already visible:
-- it receives what happens from now on, not the tenant's whole history.
INSERT INTO event_webhooks (tenant_id, url, secret_ciphertext, cursor_txid, cursor_id,
                            next_attempt_at, updated_at)
SELECT %(tenant_id)s, %(url)s, %(secret)s,
       coalesce(max(txid), '0'::xid8), coalesce(max(id), 0), %(now)s, %(now)s
FROM (SELECT txid, id FROM events WHERE tenant_id = %(tenant_id)s
      ORDER BY txid DESC, id DESC LIMIT 1) newest
ON CONFLICT (tenant_id) DO UPDATE SET
    url = EXCLUDED.url, secret_ciphertext = EXCLUDED.secret_ciphertext,
    failures = 0, next_attempt_at = EXCLUDED.next_attempt_at, updated_at = EXCLUDED.updated_at;

-- name: delete_event_webhook
DELETE FROM event_webhooks WHERE tenant_id = %(tenant_id)s;

-- name: due_event_webhooks
-- Leased by pushing the next attempt time forward, so one process pushes a
-- tenant's events at a time and the HTTP call holds no transaction open.
UPDATE event_webhooks SET next_attempt_at = %(lease_until)s
WHERE tenant_id IN (
    SELECT tenant_id FROM event_webhooks WHERE next_attempt_at <= %(now)s
    ORDER BY next_attempt_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
RETURNING tenant_id, url, secret_ciphertext, cursor_txid::text AS cursor_txid, cursor_id,
          failures;

-- name: event_webhook_delivered
UPDATE event_webhooks SET cursor_txid = %(txid)s::xid8, cursor_id = %(id)s, failures = 0,
       last_error = NULL, last_delivered_at = %(now)s, next_attempt_at = %(next)s,
       updated_at = %(now)s
WHERE tenant_id = %(tenant_id)s;

-- name: event_webhook_failed
UPDATE event_webhooks SET failures = failures + 1, last_error = %(error)s,
       next_attempt_at = %(next)s, updated_at = %(now)s
WHERE tenant_id = %(tenant_id)s;

-- name: event_webhook_idle
UPDATE event_webhooks SET next_attempt_at = %(next)s WHERE tenant_id = %(tenant_id)s;
