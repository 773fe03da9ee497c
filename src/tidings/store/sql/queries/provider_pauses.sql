-- name: provider_pause_lock
-- The account's row, locked, so two workers' back-off answers count in order.
SELECT failures, paused_until FROM provider_pauses WHERE account = %(account)s FOR UPDATE;

-- name: provider_pause_note
-- One more back-off answer; a pause only ever lengthens.
INSERT INTO provider_pauses (account, paused_until, failures, code, updated_at)
VALUES (%(account)s, %(until)s, %(failures)s, %(code)s, %(now)s)
ON CONFLICT (account) DO UPDATE SET
    paused_until = greatest(provider_pauses.paused_until, EXCLUDED.paused_until),
    failures = EXCLUDED.failures, code = EXCLUDED.code, updated_at = EXCLUDED.updated_at
RETURNING paused_until;

-- name: provider_pause_reset
-- The account accepted a message: the back-off count starts again. A pause
-- already running is left to expire (other workers' answers may be in flight).
UPDATE provider_pauses SET failures = 0, updated_at = %(now)s
WHERE account = ANY(%(accounts)s::text[]) AND failures > 0;

-- name: provider_paused_until
SELECT paused_until FROM provider_pauses
WHERE account = %(account)s AND paused_until > %(now)s;

-- name: provider_pauses_active
SELECT account, paused_until, failures, code FROM provider_pauses
WHERE paused_until > %(now)s ORDER BY account;
