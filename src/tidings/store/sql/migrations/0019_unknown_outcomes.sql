-- Outcomes that stayed unknown are counted and paged on
-- (observability/alert_rules.py, report_delivery_unknown): found by this
-- index, not by a scan of every terminal intent.
CREATE INDEX intents_unknown ON intents (tenant_id, event_class, channel, terminal_at)
    WHERE state = 'unknown';
