-- name: provider_pause_lock
-- The account's row, locked, so two workers' back-off answers count in order.
-- Always locked before a tenant's row (provider_backoff_lock): one order, no deadlock.
SELECT failures, paused_until, code FROM provider_pauses WHERE account = %(account)s FOR UPDATE;

-- name: provider_pause_note
-- One more back-off answer; a pause only ever lengthens. `caused_by` is the
-- tenant whose answer set the pause's end, so it names the longest one.
INSERT INTO provider_pauses (account, paused_until, failures, code, updated_at, caused_by)
VALUES (%(account)s, %(until)s, %(failures)s, %(code)s, %(now)s, %(tenant_id)s)
ON CONFLICT (account) DO UPDATE SET
    paused_until = greatest(provider_pauses.paused_until, EXCLUDED.paused_until),
    caused_by = CASE WHEN EXCLUDED.paused_until >= provider_pauses.paused_until
                     THEN EXCLUDED.caused_by ELSE provider_pauses.caused_by END,
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
SELECT account, paused_until, failures, code, coalesce(caused_by, '') AS caused_by
FROM provider_pauses
WHERE paused_until > %(now)s ORDER BY account;

-- name: provider_backoff_lock
-- The tenant's own count on the account, locked (after the account's row).
SELECT failures, code FROM provider_backoffs
WHERE tenant_id = %(tenant_id)s AND account = %(account)s FOR UPDATE;

-- name: provider_backoff_note
-- One more back-off answer drawn by this tenant's traffic; a hold only lengthens.
INSERT INTO provider_backoffs (tenant_id, account, held_until, failures, code, updated_at)
VALUES (%(tenant_id)s, %(account)s, %(until)s, %(failures)s, %(code)s, %(now)s)
ON CONFLICT (tenant_id, account) DO UPDATE SET
    held_until = greatest(provider_backoffs.held_until, EXCLUDED.held_until),
    failures = EXCLUDED.failures, code = EXCLUDED.code, updated_at = EXCLUDED.updated_at
RETURNING held_until;

-- name: provider_backoff_reset
-- The account accepted the tenants' messages: their own counts start again;
-- a hold already running is left to expire, as the account's pause. One
-- statement per group: a group is one channel's calls, so one account, and
-- the tenants x accounts product is exact (with several it would at worst
-- restart a count the next answer builds again).
UPDATE provider_backoffs SET failures = 0, updated_at = %(now)s
WHERE tenant_id = ANY(%(tenants)s::text[]) AND account = ANY(%(accounts)s::text[])
  AND failures > 0;

-- name: provider_backoffs_active
SELECT tenant_id, account, held_until, failures, code FROM provider_backoffs
WHERE held_until > %(now)s ORDER BY account, tenant_id;
