-- name: expired_leases
SELECT * FROM intents
WHERE state = 'sending' AND lease_expires_at < %(now)s
ORDER BY lease_expires_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: passed_deadlines
SELECT * FROM intents
WHERE expires_at <= %(now)s
  AND state IN ('pending', 'sending', 'accepted', 'resend_due', 'reconciling')
ORDER BY expires_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: passed_deadline_ids
-- passed_deadlines by id alone, for a sweep that could not read its batch.
SELECT tenant_id, id FROM intents
WHERE expires_at <= %(now)s
  AND state IN ('pending', 'sending', 'accepted', 'resend_due', 'reconciling')
ORDER BY expires_at
LIMIT %(limit)s;

-- name: passed_deadline_one
SELECT * FROM intents
WHERE tenant_id = %(tenant_id)s AND id = %(id)s
  AND expires_at <= %(now)s
  AND state IN ('pending', 'sending', 'accepted', 'resend_due', 'reconciling')
FOR UPDATE SKIP LOCKED;

-- name: expired_lease_ids
-- expired_leases by id alone, for a batch that could not be read whole.
SELECT tenant_id, id FROM intents
WHERE state = 'sending' AND lease_expires_at < %(now)s
ORDER BY lease_expires_at
LIMIT %(limit)s;

-- name: expired_lease_one
SELECT * FROM intents
WHERE tenant_id = %(tenant_id)s AND id = %(id)s
  AND state = 'sending' AND lease_expires_at < %(now)s
FOR UPDATE SKIP LOCKED;
