-- The plan guard's second load: as much again of what a read of one page
-- or one key must not notice. Job a001 doubles with finished recipients
-- past the pages the guard reads, and tenant t3 gains as many finished
-- single intents, each with its attempt, receipt, audit and event. A query
-- whose cost follows its page or its key reads the same after this.

INSERT INTO job_recipients (tenant_id, job_id, seq, recipient_ref, phone_hash, timezone, locale)
SELECT 't1', '01900000-0000-7000-8000-00000000a001', 60000 + s, 'rg' || s, 'pg' || s, 'UTC', 'en'
FROM generate_series(1, 60000) AS s;

CREATE TEMP TABLE guard_more AS
SELECT 't1'::text AS tenant_id, '01900000-0000-7000-8000-00000000a001'::uuid AS job_id,
       60000 + s AS seq, 200000 + s AS g
FROM generate_series(1, 60000) AS s
UNION ALL
SELECT 't3', NULL, NULL, 300000 + s FROM generate_series(1, 60000) AS s;

INSERT INTO intents (tenant_id, id, idempotency_key, request_hash, channel, state, version,
                     recipient_ref, template_name, purpose, event_class, job_id, job_seq,
                     policy_version, attempt_count, created_by, created_at, accepted_at,
                     last_status_at, terminal_at, updated_at)
SELECT tenant_id,
       (lpad(to_hex(1735689600000 + g * 1000), 12, '0') || '7000' || '8'
        || lpad(to_hex(g), 15, '0'))::uuid,
       'k' || g, 'h', 'sms', 'delivered', 3, 'rg' || g, 'reset', 'security',
       CASE WHEN g % 2 = 0 THEN 'account' ELSE 'offer' END, job_id, seq, 'p1', 1, 'guard',
       at, at, at, at, at
FROM (SELECT m.*, '2026-01-01'::timestamptz + g * interval '1 second' AS at
      FROM guard_more m) s;

INSERT INTO attempts (tenant_id, intent_id, n, attempt_key, channel, state, provider,
                      provider_message_id, segments, created_at, accepted_at, last_status_at,
                      terminal_at, call_started_at)
SELECT tenant_id, id, 1, id::text || '.1', 'sms', 'delivered', 'twilio', 'SM' || idempotency_key,
       1, created_at, accepted_at, last_status_at, terminal_at, created_at
FROM intents WHERE idempotency_key IN (SELECT 'k' || g FROM guard_more);

INSERT INTO observations (tenant_id, provider, dedupe_key, intent_id, attempt_n,
                          provider_message_id, status, source, occurred_at, received_at, effect,
                          channel)
SELECT a.tenant_id, a.provider, a.provider_message_id || ':delivered', a.intent_id, 1,
       a.provider_message_id, 'delivered', 'webhook', a.terminal_at, a.terminal_at, 'applied',
       a.channel
FROM attempts a WHERE a.created_at > '2026-01-01'::timestamptz + interval '200000 seconds';

INSERT INTO transitions (tenant_id, intent_id, version, from_state, to_state, event, actor, at)
SELECT tenant_id, id, v, CASE WHEN v = 3 THEN 'pending' END,
       CASE WHEN v = 3 THEN 'delivered' ELSE 'pending' END,
       CASE WHEN v = 3 THEN 'step' ELSE 'create' END, 'guard', created_at
FROM intents, (VALUES (1), (3)) AS v (v)
WHERE created_at > '2026-01-01'::timestamptz + interval '200000 seconds';

INSERT INTO events (tenant_id, type, intent_id, job_id, created_at)
SELECT tenant_id, 'intent.delivered', id, job_id, updated_at FROM intents
WHERE created_at > '2026-01-01'::timestamptz + interval '200000 seconds';

UPDATE jobs SET audience_size = 120000, prepared_through = 120000
WHERE id = '01900000-0000-7000-8000-00000000a001';

-- As many suppressions and lifts again, older than the page the guard
-- reads, and as many of t3's.
INSERT INTO suppressions (tenant_id, channel, destination_hash, reason, created_at,
                          provider, raw_status)
SELECT t, 'sms', 'pg' || s, CASE WHEN s % 10 = 0 THEN 'invalid' ELSE 'hard_bounce' END,
       '2025-12-01'::timestamptz + s * interval '1 second', 'twilio', 'undelivered'
FROM generate_series(1, 20000) AS s, (VALUES ('t1'), ('t3')) AS v (t);

INSERT INTO suppression_lifts (tenant_id, id, channel, destination_hash, reason, created_at,
                               lifted_at, lifted_by, lift_reason)
SELECT 't1', gen_random_uuid(), 'sms', 'plg' || s, 'invalid',
       '2025-12-01'::timestamptz + s * interval '1 second',
       '2026-01-03'::timestamptz, 'guard', 'wrong rule'
FROM generate_series(1, 20000) AS s;
