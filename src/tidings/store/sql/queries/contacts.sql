-- name: upsert_contact
INSERT INTO contacts (tenant_id, ref, phone_hash, email_hash, timezone, locale, preferences,
                      updated_at)
VALUES (%(tenant_id)s, %(ref)s, %(phone_hash)s, %(email_hash)s, %(timezone)s, %(locale)s,
        %(preferences)s, %(now)s)
ON CONFLICT (tenant_id, ref) DO UPDATE SET
    phone_hash = EXCLUDED.phone_hash, email_hash = EXCLUDED.email_hash,
    timezone = EXCLUDED.timezone, locale = EXCLUDED.locale,
    preferences = EXCLUDED.preferences, updated_at = EXCLUDED.updated_at
RETURNING *;

-- name: contact_by_ref
SELECT * FROM contacts WHERE tenant_id = %(tenant_id)s AND ref = %(ref)s;

-- name: record_consent
INSERT INTO consents (tenant_id, ref, channel, purpose, source, captured_at, evidence_ref,
                      revoked_at, recorded_at)
VALUES (%(tenant_id)s, %(ref)s, %(channel)s, %(purpose)s, %(source)s, %(captured_at)s,
        %(evidence_ref)s, %(revoked_at)s, %(now)s)
ON CONFLICT (tenant_id, ref, channel, purpose, captured_at, source)
DO UPDATE SET revoked_at = coalesce(consents.revoked_at, EXCLUDED.revoked_at);

-- name: consents_for
SELECT id, evidence_ref, channel, purpose, captured_at, revoked_at FROM consents
WHERE tenant_id = %(tenant_id)s AND ref = %(ref)s AND channel = %(channel)s;

-- name: opt_out
INSERT INTO opt_outs (tenant_id, channel, destination_hash, source, created_at)
VALUES (%(tenant_id)s, %(channel)s, %(destination_hash)s, %(source)s, %(now)s)
ON CONFLICT (tenant_id, channel, destination_hash) DO NOTHING;

-- name: opt_in
DELETE FROM opt_outs
WHERE tenant_id = %(tenant_id)s AND channel = %(channel)s
  AND destination_hash = %(destination_hash)s;

-- name: suppress
INSERT INTO suppressions (tenant_id, channel, destination_hash, reason, created_at)
VALUES (%(tenant_id)s, %(channel)s, %(destination_hash)s, %(reason)s, %(now)s)
ON CONFLICT (tenant_id, channel, destination_hash) DO NOTHING;

-- name: blocks_for
-- Opt-out and suppression for one destination, in one round trip.
SELECT
    EXISTS (SELECT 1 FROM opt_outs o WHERE o.tenant_id = %(tenant_id)s
            AND o.channel = %(channel)s AND o.destination_hash = %(destination_hash)s) AS opted_out,
    (SELECT s.reason FROM suppressions s WHERE s.tenant_id = %(tenant_id)s
            AND s.channel = %(channel)s AND s.destination_hash = %(destination_hash)s) AS suppressed;

-- name: lock_recipient
-- Serializes claims for one recipient and channel, so that counting recent
-- sends and opening the next attempt cannot interleave between workers.
SELECT pg_advisory_xact_lock(hashtextextended(%(tenant_id)s || '/' || %(ref)s || '/' || %(channel)s, 7));

-- name: recent_sends
-- Attempts that may have reached the provider (everything except those
-- proven never sent), for one recipient, channel and cap window.
SELECT count(*) AS count, min(a.created_at) AS oldest_at
FROM attempts a JOIN intents i ON i.tenant_id = a.tenant_id AND i.id = a.intent_id
WHERE i.tenant_id = %(tenant_id)s AND i.recipient_ref = %(ref)s AND i.channel = %(channel)s
  AND a.created_at > %(since)s
  AND (%(purposes)s::text[] IS NULL OR i.purpose = ANY(%(purposes)s::text[]))
  AND NOT (a.state = 'failed' AND a.accepted_at IS NULL);

-- name: opt_out_observed
-- A provider's receipt said the recipient unsubscribed (or replied STOP).
-- The first evidence stays: a later receipt for the same address adds nothing.
INSERT INTO opt_outs (tenant_id, channel, destination_hash, source, created_at,
                      provider, intent_id, attempt_n, raw_status)
VALUES (%(tenant_id)s, %(channel)s, %(destination_hash)s, 'provider:' || %(provider)s, %(now)s,
        %(provider)s, %(intent_id)s, %(attempt_n)s, left(%(raw_status)s, 200))
ON CONFLICT (tenant_id, channel, destination_hash) DO NOTHING
RETURNING created_at;

-- name: suppress_observed
-- A provider's receipt reported a spam complaint or a hard bounce, or its
-- answer to a send said the address does not exist (`invalid`).
INSERT INTO suppressions (tenant_id, channel, destination_hash, reason, created_at,
                          provider, intent_id, attempt_n, raw_status)
VALUES (%(tenant_id)s, %(channel)s, %(destination_hash)s, %(reason)s, %(now)s,
        %(provider)s, %(intent_id)s, %(attempt_n)s, left(%(raw_status)s, 200))
ON CONFLICT (tenant_id, channel, destination_hash) DO NOTHING
RETURNING created_at;

-- name: receipt_blocks
-- Opt-outs and suppressions that providers' receipts caused, by kind.
SELECT 'opt_out' AS kind, provider, count(*) AS count FROM opt_outs
WHERE tenant_id = %(tenant_id)s AND provider IS NOT NULL GROUP BY provider
UNION ALL
SELECT reason, provider, count(*) FROM suppressions
WHERE tenant_id = %(tenant_id)s AND provider IS NOT NULL GROUP BY reason, provider
ORDER BY 1, 2;

-- name: lift_suppression
-- An operator lifts one suppression (0035): the row moves, its evidence
-- with it, to suppression_lifts with who, when and why, in one statement,
-- so no reader sees the address both suppressed and lifted, or neither.
-- No row: no such active suppression in this tenant (unknown, or lifted).
WITH lifted AS (
    DELETE FROM suppressions
    WHERE tenant_id = %(tenant_id)s AND id = %(id)s
    RETURNING *
)
INSERT INTO suppression_lifts (tenant_id, id, channel, destination_hash, reason, created_at,
                               provider, intent_id, attempt_n, raw_status,
                               lifted_at, lifted_by, lift_reason)
SELECT tenant_id, id, channel, destination_hash, reason, created_at,
       provider, intent_id, attempt_n, raw_status, %(now)s, %(actor)s, %(why)s
FROM lifted
RETURNING id;
