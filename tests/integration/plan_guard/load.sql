-- The plan guard's load (tests/integration/test_plan_guard.py): 120,000
-- intents with their attempts, observations, transitions, events and job
-- recipients, over three tenants and four jobs, written in set-returning
-- INSERTs so it loads in seconds. Nothing here analyzes a table: the guard
-- plans on tables exactly as young as a fresh job's.
--
-- Ids are UUIDv7-shaped (a millisecond prefix), so they sort by creation
-- like the engine's own (store/ids.py), and fall in the default partitions.

INSERT INTO tenants (tenant_id, name) VALUES ('t1', 't1'), ('t2', 't2'), ('t3', 't3');

CREATE TEMP TABLE guard_jobs (tenant_id text, id uuid, n integer, first integer);
INSERT INTO guard_jobs VALUES
    ('t1', '01900000-0000-7000-8000-00000000a001', 60000, 0),
    ('t1', '01900000-0000-7000-8000-00000000a002', 20000, 60000),
    ('t2', '01900000-0000-7000-8000-00000000a003', 20000, 80000),
    ('t2', '01900000-0000-7000-8000-00000000a004', 10, 100000);

INSERT INTO jobs (tenant_id, id, idempotency_key, request_hash, event_class, purpose,
                  template_name, template_revisions, channels, channel_mode, policy_version,
                  audience_version, audience_size, status, created_by, created_at, updated_at,
                  prepared_through, prepared_at)
SELECT tenant_id, id, 'job-' || id, 'h', 'account', 'security', 'reset', '{}', '{sms,email}',
       'preferred', 'p1', 'a1', n,
       CASE WHEN n = 10 THEN 'preparing' ELSE 'dispatching' END,
       'guard', '2026-01-01', '2026-01-01', n, '2026-01-01'
FROM guard_jobs;

INSERT INTO job_recipients (tenant_id, job_id, seq, recipient_ref, phone_hash, timezone, locale)
SELECT j.tenant_id, j.id, s, 'r' || (j.first + s), 'ph' || (j.first + s), 'UTC', 'en'
FROM guard_jobs j, generate_series(1, j.n) AS s;

-- Intents: the jobs' first (one per recipient, sms), then 20,000 single
-- intents of t3. g numbers them; the id carries g in its time prefix.
CREATE TEMP TABLE guard_intents AS
SELECT r.tenant_id, r.job_id, r.seq, j.first + r.seq AS g
FROM job_recipients r JOIN guard_jobs j ON j.tenant_id = r.tenant_id AND j.id = r.job_id
WHERE j.n > 10
UNION ALL
SELECT 't3', NULL::uuid, NULL::integer, 100000 + s FROM generate_series(1, 20000) AS s;

INSERT INTO intents (tenant_id, id, idempotency_key, request_hash, channel, state, version,
                     recipient_ref, template_name, purpose, event_class, correlation_id,
                     job_id, job_seq, policy_version, decision_code, attempt_count,
                     next_due_at, lease_owner, lease_expires_at, expires_at, created_by,
                     created_at, accepted_at, last_status_at, terminal_at, updated_at,
                     claimed_at)
SELECT tenant_id, id, 'k' || g, 'h', 'sms', state, 3, 'r' || g, 'reset', 'security',
       CASE WHEN g % 2 = 0 THEN 'account' ELSE 'offer' END,
       CASE WHEN g % 10 = 0 THEN 'c' || (g / 10) END,
       job_id, seq, 'p1',
       CASE WHEN state = 'failed' THEN 'PROVIDER_REJECTED' END,
       CASE WHEN state IN ('pending') THEN 0 ELSE 1 END,
       CASE WHEN state IN ('pending', 'resend_due') THEN at + interval '1 minute' END,
       CASE WHEN state = 'sending' THEN 'w1' END,
       CASE WHEN state = 'sending' THEN at + interval '5 minutes' END,
       CASE WHEN state IN ('pending', 'sending', 'accepted') THEN at + interval '1 day' END,
       'guard', at,
       CASE WHEN state NOT IN ('pending', 'canceled') THEN at END,
       CASE WHEN state NOT IN ('pending', 'canceled') THEN at END,
       CASE WHEN state IN ('delivered', 'failed', 'canceled') THEN at END,
       at,
       -- A claim's time (0047), as its attempt's creation below.
       CASE WHEN state NOT IN ('pending', 'canceled') THEN at END
FROM (
    SELECT i.*, ('2026-01-01'::timestamptz + g * interval '1 second') AS at,
           (lpad(to_hex(1735689600000 + g * 1000), 12, '0') || '7000' || '8'
            || lpad(to_hex(g), 15, '0'))::uuid AS id,
           CASE
               WHEN g % 100 < 80 THEN 'delivered'
               WHEN g % 100 < 88 THEN 'accepted'
               WHEN g % 100 < 94 THEN 'pending'
               WHEN g % 100 < 96 THEN 'sending'
               WHEN g % 100 < 98 THEN 'failed'
               ELSE 'canceled'
           END AS state
    FROM guard_intents i
) s;

-- One attempt per intent that reached a provider, with its receipt. The
-- failed ones were refused for a fault of ours (alert_provider_refused):
-- 2,400 of them, all but the last hour's history the alert must not read.
INSERT INTO attempts (tenant_id, intent_id, n, attempt_key, channel, state, provider,
                      provider_message_id, segments, created_at, accepted_at, last_status_at,
                      terminal_at, next_check_at, call_started_at, code)
SELECT tenant_id, id, 1, id::text || '.1', 'sms',
       CASE state WHEN 'delivered' THEN 'delivered' WHEN 'failed' THEN 'failed'
                  WHEN 'sending' THEN 'sending' ELSE 'accepted' END,
       'twilio', 'SM' || idempotency_key, 1, created_at, accepted_at, last_status_at,
       terminal_at,
       CASE WHEN state IN ('accepted', 'sending') THEN created_at + interval '10 minutes' END,
       created_at,
       CASE WHEN state = 'failed' THEN
           (ARRAY['REQUEST_INVALID', 'SENDER_REJECTED', 'ACCOUNT_RESTRICTED'])[1 + substr(idempotency_key, 2)::integer % 3]
       END
FROM intents WHERE state NOT IN ('pending', 'canceled');

INSERT INTO observations (tenant_id, provider, dedupe_key, intent_id, attempt_n,
                          provider_message_id, status, source, occurred_at, received_at, effect,
                          channel)
SELECT tenant_id, provider, provider_message_id || ':' || state, intent_id, n,
       provider_message_id, state, 'webhook', last_status_at, last_status_at, 'applied', channel
FROM attempts;

-- Two transitions per intent: created, then where it is now.
INSERT INTO transitions (tenant_id, intent_id, version, from_state, to_state, event, actor, at)
SELECT tenant_id, id, 1, NULL, 'pending', 'create', 'guard', created_at FROM intents
UNION ALL
SELECT tenant_id, id, 3, 'pending', state, 'step', 'guard', updated_at FROM intents;

INSERT INTO events (tenant_id, type, intent_id, job_id, created_at)
SELECT tenant_id, 'intent.' || state, id, job_id, updated_at FROM intents;

-- Suppressions (0035): 20,000 of t1, most of them hard bounces a receipt
-- wrote (each naming its intent), a tenth `invalid` with no evidence as the
-- rule before issue 37 wrote them; and 20,000 lifted ones.
INSERT INTO suppressions (tenant_id, channel, destination_hash, reason, created_at,
                          provider, intent_id, attempt_n, raw_status)
SELECT 't1', 'sms', 'ph' || g,
       CASE g % 10 WHEN 0 THEN 'invalid' WHEN 1 THEN 'complaint' ELSE 'hard_bounce' END,
       '2026-01-02'::timestamptz + g * interval '1 second',
       CASE WHEN g % 10 <> 0 THEN 'twilio' END,
       CASE WHEN g % 10 <> 0 THEN (lpad(to_hex(1735689600000 + g * 1000), 12, '0') || '7000'
                                   || '8' || lpad(to_hex(g), 15, '0'))::uuid END,
       CASE WHEN g % 10 <> 0 THEN 1 END,
       CASE WHEN g % 10 <> 0 THEN 'undelivered' END
FROM generate_series(60001, 80000) AS g;

INSERT INTO suppression_lifts (tenant_id, id, channel, destination_hash, reason, created_at,
                               lifted_at, lifted_by, lift_reason)
SELECT 't1', gen_random_uuid(), 'sms', 'pl' || s, 'invalid',
       '2026-01-02'::timestamptz + s * interval '1 second',
       '2026-01-03'::timestamptz, 'guard', 'wrong rule'
FROM generate_series(1, 20000) AS s;
