-- Scenario 9's job (bench/scenarios/reads.py): n recipients, each with
-- an intent, the ones sent with an attempt, written in set-returning
-- INSERTs on tables autovacuum may not touch: never analyzed, as a fresh
-- job's tables are when its first status polls and pages come.
INSERT INTO tenants (tenant_id, name) VALUES ('reads', 'reads');
INSERT INTO jobs (tenant_id, id, idempotency_key, request_hash, event_class, purpose,
                  template_name, template_revisions, channels, channel_mode, policy_version,
                  audience_version, audience_size, status, created_by, created_at, updated_at,
                  prepared_through, prepared_at)
VALUES ('reads', %(job_id)s, 'reads', 'h', 'account', 'security', 'reset', '{}', '{sms}',
        'preferred', 'p1', 'a1', %(n)s, 'dispatching', 'bench', now(), now(), %(n)s, now());
INSERT INTO job_recipients (tenant_id, job_id, seq, recipient_ref, phone_hash, timezone, locale)
SELECT 'reads', %(job_id)s, s, 'r' || s, 'ph' || s, 'UTC', 'en'
FROM generate_series(1, %(n)s) AS s;
INSERT INTO intents (tenant_id, id, idempotency_key, request_hash, channel, state, version,
                     recipient_ref, template_name, purpose, event_class, job_id, job_seq,
                     policy_version, attempt_count, next_due_at, created_by, created_at,
                     accepted_at, terminal_at, updated_at)
SELECT 'reads', (lpad(to_hex(1735689600000 + s), 12, '0') || '7000' || '8'
                 || lpad(to_hex(s), 15, '0'))::uuid,
       'k' || s, 'h', 'sms', CASE WHEN mod(s, 10) < 7 THEN 'delivered' ELSE 'pending' END, 2,
       'r' || s, 'reset', 'security', 'account', %(job_id)s, s, 'p1',
       CASE WHEN mod(s, 10) < 7 THEN 1 ELSE 0 END,
       CASE WHEN mod(s, 10) >= 7 THEN now() END, 'bench', now(),
       CASE WHEN mod(s, 10) < 7 THEN now() END, CASE WHEN mod(s, 10) < 7 THEN now() END, now()
FROM generate_series(1, %(n)s) AS s;
INSERT INTO attempts (tenant_id, intent_id, n, attempt_key, channel, state, provider,
                      provider_message_id, segments, created_at, accepted_at, terminal_at)
SELECT tenant_id, id, 1, id::text || '.1', 'sms', 'delivered', 'sim', 'SM' || idempotency_key,
       1, created_at, accepted_at, terminal_at
FROM intents WHERE tenant_id = 'reads' AND state = 'delivered';
