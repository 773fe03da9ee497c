-- Alerts and the sweeper's rounds: the one writer of `alerts` and
-- `alert_rounds` (store/alerts.py).

-- name: alerts_lock
-- One evaluator at a time across workers; the others skip this round.
SELECT pg_try_advisory_xact_lock(%(lock)s) AS locked;

-- name: alert_round_claim
-- The periodic evaluation's turn: taken when the last one is at least an
-- interval old, and at least `spacing` times what that one took (or in the
-- future: a clock set back must not stop alerts), in the evaluation's
-- transaction, so a round that fails is counted only by alert_round_failed.
INSERT INTO alert_rounds (scope, last_at) VALUES (%(scope)s, %(now)s)
ON CONFLICT (scope) DO UPDATE SET last_at = EXCLUDED.last_at
WHERE alert_rounds.last_at <= EXCLUDED.last_at - make_interval(
          secs => greatest(%(every)s, %(spacing)s * alert_rounds.took_seconds))
   OR alert_rounds.last_at > EXCLUDED.last_at
RETURNING last_at;

-- name: alert_round_cost
UPDATE alert_rounds SET took_seconds = %(took)s WHERE scope = %(scope)s;

-- name: alert_round_failed
-- A round that failed (its scans ran past the statement timeout) still cost
-- what it took: counted, so the next waits in proportion instead of
-- failing again an interval later.
INSERT INTO alert_rounds (scope, last_at, took_seconds) VALUES (%(scope)s, %(now)s, %(took)s)
ON CONFLICT (scope) DO UPDATE SET last_at = EXCLUDED.last_at, took_seconds = EXCLUDED.took_seconds
WHERE alert_rounds.last_at <= EXCLUDED.last_at - make_interval(secs => %(every)s)
   OR alert_rounds.last_at > EXCLUDED.last_at;

-- name: alerts_open_all
SELECT * FROM alerts WHERE resolved_at IS NULL ORDER BY tenant_id, opened_at;

-- name: alert_open
INSERT INTO alerts (tenant_id, id, key, condition, severity, summary, details, opened_at,
                    updated_at)
VALUES (%(tenant_id)s, %(id)s, %(key)s, %(condition)s, %(severity)s, %(summary)s,
        %(details)s, %(now)s, %(now)s)
ON CONFLICT (tenant_id, key) WHERE resolved_at IS NULL DO NOTHING
RETURNING *;

-- name: alert_update
UPDATE alerts SET severity = %(severity)s, summary = %(summary)s, details = %(details)s,
                  updated_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND id = %(id)s AND resolved_at IS NULL
RETURNING *;

-- name: alert_resolve
UPDATE alerts SET resolved_at = %(now)s, updated_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND id = %(id)s AND resolved_at IS NULL
RETURNING *;

-- name: alerts_claim_notifications
-- Announcements owed: an opening (or escalation to page) not yet sent, or
-- a resolution not yet sent (recent ones only: turning a webhook on must
-- not replay last year). Claimed by pushing notify_after forward, so the
-- HTTP call happens outside any transaction and no other worker sends it.
UPDATE alerts SET notify_after = %(lease_until)s
WHERE (tenant_id, id) IN (
    SELECT tenant_id, id FROM alerts
    WHERE (notify_after IS NULL OR notify_after <= %(now)s)
      AND ((resolved_at IS NULL
            AND (notified_severity IS NULL
                 OR (severity = 'page' AND notified_severity = 'warning')))
           OR (resolved_at IS NOT NULL AND resolved_notified_at IS NULL
               AND resolved_at >= %(resolved_since)s))
    ORDER BY updated_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED)
RETURNING *;

-- name: alert_notified
UPDATE alerts SET
    notified_severity = CASE WHEN %(announced)s = 'resolved' THEN notified_severity
                             ELSE %(severity)s END,
    resolved_notified_at = CASE WHEN %(announced)s = 'resolved' THEN %(now)s
                                ELSE resolved_notified_at END,
    notify_failures = 0,
    notify_after = NULL
WHERE tenant_id = %(tenant_id)s AND id = %(id)s;

-- name: alert_notify_failed
UPDATE alerts SET notify_failures = notify_failures + 1, notify_after = %(retry_at)s
WHERE tenant_id = %(tenant_id)s AND id = %(id)s;
