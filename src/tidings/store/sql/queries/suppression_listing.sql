-- name: list_suppressions
-- One page of a tenant's active suppressions, newest first, after the
-- cursor's row (each filter NULL: not filtered on), each with the
-- recipient of the intent its evidence names. Planned with its parameters,
-- so the NULL filters fold away and the planner walks the index that leads
-- with the filter given and ends in (created_at, id) (0035).
-- plan: each time
SELECT s.id, s.channel, s.destination_hash, s.reason, s.created_at, s.provider,
       s.intent_id, s.attempt_n, s.raw_status, i.recipient_ref
FROM suppressions s
LEFT JOIN intents i ON i.tenant_id = s.tenant_id AND i.id = s.intent_id
WHERE s.tenant_id = %(tenant_id)s
  AND (%(reason)s::text IS NULL OR s.reason = %(reason)s::text)
  AND (%(provider)s::text IS NULL OR s.provider = %(provider)s::text)
  AND (%(channel)s::text IS NULL OR s.channel = %(channel)s::text)
  AND (%(since)s::timestamptz IS NULL OR s.created_at >= %(since)s::timestamptz)
  AND (%(after_at)s::timestamptz IS NULL
       OR (s.created_at, s.id) < (%(after_at)s::timestamptz, %(after_id)s::uuid))
ORDER BY s.created_at DESC, s.id DESC
LIMIT %(limit)s;

-- name: list_suppression_lifts
-- One page of a tenant's lifted suppressions, by the suppression's own
-- creation, newest first; the same filters.
-- plan: each time
SELECT l.id, l.channel, l.destination_hash, l.reason, l.created_at, l.provider,
       l.intent_id, l.attempt_n, l.raw_status, i.recipient_ref,
       l.lifted_at, l.lifted_by, l.lift_reason
FROM suppression_lifts l
LEFT JOIN intents i ON i.tenant_id = l.tenant_id AND i.id = l.intent_id
WHERE l.tenant_id = %(tenant_id)s
  AND (%(reason)s::text IS NULL OR l.reason = %(reason)s::text)
  AND (%(provider)s::text IS NULL OR l.provider = %(provider)s::text)
  AND (%(channel)s::text IS NULL OR l.channel = %(channel)s::text)
  AND (%(since)s::timestamptz IS NULL OR l.created_at >= %(since)s::timestamptz)
  AND (%(after_at)s::timestamptz IS NULL
       OR (l.created_at, l.id) < (%(after_at)s::timestamptz, %(after_id)s::uuid))
ORDER BY l.created_at DESC, l.id DESC
LIMIT %(limit)s;

-- name: suppression_by_id
SELECT s.id, s.channel, s.destination_hash, s.reason, s.created_at, s.provider,
       s.intent_id, s.attempt_n, s.raw_status, i.recipient_ref
FROM suppressions s
LEFT JOIN intents i ON i.tenant_id = s.tenant_id AND i.id = s.intent_id
WHERE s.tenant_id = %(tenant_id)s AND s.id = %(id)s;

-- name: suppression_lift_by_id
SELECT l.id, l.channel, l.destination_hash, l.reason, l.created_at, l.provider,
       l.intent_id, l.attempt_n, l.raw_status, i.recipient_ref,
       l.lifted_at, l.lifted_by, l.lift_reason
FROM suppression_lifts l
LEFT JOIN intents i ON i.tenant_id = l.tenant_id AND i.id = l.intent_id
WHERE l.tenant_id = %(tenant_id)s AND l.id = %(id)s;
