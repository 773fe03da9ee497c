-- name: cancel_candidates
-- One batch of the tenant's open intents matching a bulk cancel's filter
-- by event class, recipient or correlation id (each NULL: not filtered
-- on), in (created_at, id) order after the last batch's last row. Planned
-- with its parameters, so only the given filters' indexes are considered:
-- the listing indexes, which end in (created_at, id) (0034; since 0048 the
-- only indexes leading with these filters), walked from the cursor, never
-- a generic plan that must scan the tenant.
-- plan: each time
SELECT id, created_at FROM intents
WHERE tenant_id = %(tenant_id)s
  AND (%(after_at)s::timestamptz IS NULL
       OR (created_at, id) > (%(after_at)s::timestamptz, %(after_id)s::uuid))
  AND state NOT IN ('delivered', 'canceled', 'suppressed', 'no_permitted_channel',
                    'failed', 'expired')
  AND (%(event_class)s::text IS NULL OR event_class = %(event_class)s::text)
  AND (%(recipient_ref)s::text IS NULL OR recipient_ref = %(recipient_ref)s::text)
  AND (%(correlation_id)s::text IS NULL OR correlation_id = %(correlation_id)s::text)
ORDER BY created_at, id
LIMIT %(limit)s;

-- name: cancel_candidates_in_job
-- The same for a cancel of one job (the other filters may narrow it), in
-- id order after the last batch, through intents_job (tenant, job, id).
-- plan: each time
SELECT id, created_at FROM intents
WHERE tenant_id = %(tenant_id)s AND job_id = %(job_id)s AND id > %(after_id)s
  AND state NOT IN ('delivered', 'canceled', 'suppressed', 'no_permitted_channel',
                    'failed', 'expired')
  AND (%(event_class)s::text IS NULL OR event_class = %(event_class)s::text)
  AND (%(recipient_ref)s::text IS NULL OR recipient_ref = %(recipient_ref)s::text)
  AND (%(correlation_id)s::text IS NULL OR correlation_id = %(correlation_id)s::text)
ORDER BY id
LIMIT %(limit)s;

-- name: count_final_matching
-- How many intents matching the filter were already final.
-- plan: each time
SELECT count(*) AS n FROM intents
WHERE tenant_id = %(tenant_id)s
  AND state IN ('delivered', 'canceled', 'suppressed', 'no_permitted_channel',
                'failed', 'expired')
  AND (%(job_id)s::uuid IS NULL OR job_id = %(job_id)s::uuid)
  AND (%(event_class)s::text IS NULL OR event_class = %(event_class)s::text)
  AND (%(recipient_ref)s::text IS NULL OR recipient_ref = %(recipient_ref)s::text)
  AND (%(correlation_id)s::text IS NULL OR correlation_id = %(correlation_id)s::text);
