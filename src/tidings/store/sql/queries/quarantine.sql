-- name: metrics_quarantined
-- Quarantined intents per tenant and code, from rows (invariant 7).
SELECT tenant_id, decision_code AS code, count(*) AS n FROM intents
WHERE decision_code IN ('UNDECODABLE', 'UNRENDERABLE')
GROUP BY tenant_id, decision_code;

-- name: alert_quarantined
-- Tenants with intents quarantined since `since`, or rows and documents a
-- shared loop set aside (quarantine_log, 0027): the alert holds while any
-- is that recent, then resolves itself.
WITH q AS (
    SELECT tenant_id, terminal_at AS at,
           jsonb_build_object('intent_id', id, 'code', decision_code, 'at', terminal_at) AS sample
    FROM intents
    WHERE decision_code IN ('UNDECODABLE', 'UNRENDERABLE') AND terminal_at >= %(since)s
    UNION ALL
    SELECT tenant_id, at,
           jsonb_build_object('loop', loop, 'subject', subject, 'code', code, 'at', at)
    FROM quarantine_log WHERE at >= %(since)s
)
SELECT tenant_id, count(*) AS n, max(at) AS latest_at,
       (array_agg(sample ORDER BY at DESC))[1:5] AS samples
FROM q
GROUP BY tenant_id;
