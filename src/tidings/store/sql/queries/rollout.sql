-- name: rollout_counts
-- One rollout step's intents (docs/operations.md, "Rolling out"), created
-- in [since, until) in the scope (a NULL filter covers all), by where they
-- stand. Through intents_listing (tenant, created_at): it reads the step's
-- window, never the tenant's history.
SELECT count(*) AS intents,
       count(*) FILTER (WHERE i.state IN ('pending', 'resend_due')) AS waiting,
       count(*) FILTER (WHERE i.state NOT IN ('pending', 'resend_due')) AS decided,
       count(*) FILTER (WHERE i.decision_code = 'SHADOW_MODE') AS shadowed,
       count(*) FILTER (WHERE i.accepted_at IS NOT NULL) AS sent,
       count(*) FILTER (WHERE i.state = 'delivered') AS delivered,
       count(*) FILTER (WHERE i.state = 'failed') AS failed,
       count(*) FILTER (WHERE i.state = 'unknown') AS unknown,
       count(*) FILTER (WHERE i.state IN ('sending', 'accepted', 'reconciling')) AS in_flight,
       count(*) FILTER (
           WHERE i.state IN ('suppressed', 'no_permitted_channel', 'expired', 'canceled')
             AND i.decision_code IS DISTINCT FROM 'SHADOW_MODE') AS not_sent
FROM intents i
WHERE i.tenant_id = %(tenant_id)s
  AND i.created_at >= %(since)s AND i.created_at < %(until)s
  AND (%(channel)s::text IS NULL OR i.channel = %(channel)s::text)
  AND (%(country)s::text IS NULL OR i.country = %(country)s::text)
  AND (%(purpose)s::text IS NULL OR i.purpose = %(purpose)s::text)
  AND (%(event_class)s::text IS NULL OR i.event_class = %(event_class)s::text);
