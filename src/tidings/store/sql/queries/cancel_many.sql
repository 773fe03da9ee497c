-- name: cancel_candidates
-- One batch of the tenant's open intents matching a bulk cancel's filter
-- (each filter NULL: not filtered on), in id order after the last batch.
-- Planned with its parameters, so only the given filters' indexes are
-- considered (intents_job, intents_recipient, intents_event_class,
-- intents_correlation), never a generic plan that must scan the tenant.
-- plan: each time
SELECT id FROM intents
WHERE tenant_id = %(tenant_id)s AND id > %(after)s
  AND state NOT IN ('delivered', 'canceled', 'suppressed', 'no_permitted_channel',
                    'failed', 'expired')
  AND (%(job_id)s::uuid IS NULL OR job_id = %(job_id)s::uuid)
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
