-- name: list_intents
-- One page of a tenant's intents, newest first, after the cursor's row
-- (each filter NULL: not filtered on). Planned with its parameters, so the
-- NULL filters fold away and the planner walks the one index that leads
-- with a given filter and ends in (created_at, id) (0034_intent_listing):
-- the page stops after `limit` rows, never a sort of the tenant's intents.
-- plan: each time
SELECT * FROM intents
WHERE tenant_id = %(tenant_id)s
  AND (%(idempotency_key)s::text IS NULL OR idempotency_key = %(idempotency_key)s::text)
  AND (%(recipient_ref)s::text IS NULL OR recipient_ref = %(recipient_ref)s::text)
  AND (%(event_class)s::text IS NULL OR event_class = %(event_class)s::text)
  AND (%(state)s::text IS NULL OR state = %(state)s::text)
  AND (%(correlation_id)s::text IS NULL OR correlation_id = %(correlation_id)s::text)
  AND (%(created_from)s::timestamptz IS NULL OR created_at >= %(created_from)s::timestamptz)
  AND (%(created_to)s::timestamptz IS NULL OR created_at < %(created_to)s::timestamptz)
  AND (%(after_at)s::timestamptz IS NULL
       OR (created_at, id) < (%(after_at)s::timestamptz, %(after_id)s::uuid))
ORDER BY created_at DESC, id DESC
LIMIT %(limit)s;
