-- name: shadow_decisions
-- Intents a shadow-mode claim decided, with what it would have done, in
-- keyset pages; the window is on the decision's own time.
SELECT i.id, i.idempotency_key, i.event_class, i.channel, i.country,
       t.at, t.policy_version, t.input ->> 'code' AS code,
       t.input ->> 'would' AS would, t.input ->> 'would_action' AS would_action
FROM intents i
JOIN transitions t
  ON t.tenant_id = i.tenant_id AND t.intent_id = i.id AND t.decision_code = 'SHADOW_MODE'
WHERE i.tenant_id = %(tenant_id)s AND i.decision_code = 'SHADOW_MODE'
  AND t.at >= %(since)s AND t.at < %(until)s
  AND i.id > %(after)s
ORDER BY i.id
LIMIT %(limit)s;
