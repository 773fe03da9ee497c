-- Every time a tenant supplies lies in [1970-01-01, 9000-01-01) UTC
-- (domain/moments.py holds the same two bounds). PostgreSQL accepts years
-- from 4713 BC to 294276 AD, Python only 1 to 9999: a tenant's expiry of
-- `9999-12-31T23:59:59-23:59` (year 10000 in UTC) could be stored but not
-- read back, and the shared claim query then stopped every tenant's sends.
-- The API and the library refuse such times; these constraints hold for
-- every other path (a COPY, a hand-written UPDATE, an older release).
--
-- Rows stored before the check are brought into range first, keeping what
-- they meant: an expiry or not-before far in the future stays far in the
-- future, one before 1970 becomes 1970 (already past).

UPDATE intents SET
    expires_at = least(greatest(expires_at, '1970-01-01 00:00:00+00'),
                       '8999-12-31 23:59:59+00')
WHERE NOT (expires_at >= '1970-01-01 00:00:00+00' AND expires_at < '9000-01-01 00:00:00+00');
UPDATE intents SET
    not_before = least(greatest(not_before, '1970-01-01 00:00:00+00'),
                       '8999-12-31 23:59:59+00')
WHERE NOT (not_before >= '1970-01-01 00:00:00+00' AND not_before < '9000-01-01 00:00:00+00');
UPDATE intents SET
    next_due_at = least(greatest(next_due_at, '1970-01-01 00:00:00+00'),
                        '8999-12-31 23:59:59+00')
WHERE NOT (next_due_at >= '1970-01-01 00:00:00+00' AND next_due_at < '9000-01-01 00:00:00+00');
UPDATE consents SET
    captured_at = least(greatest(captured_at, '1970-01-01 00:00:00+00'),
                        '8999-12-31 23:59:59+00')
WHERE NOT (captured_at >= '1970-01-01 00:00:00+00' AND captured_at < '9000-01-01 00:00:00+00');
UPDATE consents SET
    revoked_at = least(greatest(revoked_at, '1970-01-01 00:00:00+00'),
                       '8999-12-31 23:59:59+00')
WHERE NOT (revoked_at >= '1970-01-01 00:00:00+00' AND revoked_at < '9000-01-01 00:00:00+00');
UPDATE jobs SET
    expires_at = least(greatest(expires_at, '1970-01-01 00:00:00+00'),
                       '8999-12-31 23:59:59+00')
WHERE NOT (expires_at >= '1970-01-01 00:00:00+00' AND expires_at < '9000-01-01 00:00:00+00');

ALTER TABLE intents
    ADD CONSTRAINT intents_expires_at_bounded
        CHECK (expires_at >= '1970-01-01 00:00:00+00' AND expires_at < '9000-01-01 00:00:00+00'),
    ADD CONSTRAINT intents_not_before_bounded
        CHECK (not_before >= '1970-01-01 00:00:00+00' AND not_before < '9000-01-01 00:00:00+00'),
    ADD CONSTRAINT intents_next_due_at_bounded
        CHECK (next_due_at >= '1970-01-01 00:00:00+00' AND next_due_at < '9000-01-01 00:00:00+00');
ALTER TABLE consents
    ADD CONSTRAINT consents_captured_at_bounded
        CHECK (captured_at >= '1970-01-01 00:00:00+00' AND captured_at < '9000-01-01 00:00:00+00'),
    ADD CONSTRAINT consents_revoked_at_bounded
        CHECK (revoked_at >= '1970-01-01 00:00:00+00' AND revoked_at < '9000-01-01 00:00:00+00');
ALTER TABLE jobs
    ADD CONSTRAINT jobs_expires_at_bounded
        CHECK (expires_at >= '1970-01-01 00:00:00+00' AND expires_at < '9000-01-01 00:00:00+00');

-- An intent the worker could not decode or render is quarantined alone
-- (state `failed`, decision code UNDECODABLE or UNRENDERABLE:
-- dispatch/quarantine.py). The alert and the metric count them per tenant
-- without scanning every intent.
CREATE INDEX intents_quarantined ON intents (tenant_id, terminal_at)
    WHERE decision_code IN ('UNDECODABLE', 'UNRENDERABLE');
