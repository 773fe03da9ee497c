-- Issue #39: a policy's numbers are bounded (domain/policy_bounds.py), and
-- what a shared loop cannot handle for one tenant is quarantined alone.

-- The first number of a policy document past its limit, as the parser
-- names it (`retry.max_seconds`, `frequency_caps[0].limit`); NULL when
-- none is. The same limits as domain/policy_bounds.py (a test compares
-- the two). Only numbers are judged: a value of another type is the
-- parser's to refuse, and the loops quarantine a document it refuses.
CREATE FUNCTION policy_out_of_bounds(doc jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    WITH limits (path, value, top) AS (
        SELECT 'resend_budget', doc -> 'resend_budget', 10::numeric
        UNION ALL
        SELECT g.name || '.' || l.key, doc -> g.name -> l.key, l.top
        FROM (VALUES ('poll_schedule', 'first_check_after_seconds', 31622400),
                     ('poll_schedule', 'factor', 10),
                     ('poll_schedule', 'max_interval_seconds', 31622400),
                     ('poll_schedule', 'max_checks', 1000),
                     ('poll_schedule', 'give_up_after_seconds', 31622400),
                     ('retry', 'base_seconds', 31622400),
                     ('retry', 'max_seconds', 31622400),
                     ('retry', 'max_failures', 1000),
                     ('retry', 'max_pending_seconds', 31622400),
                     ('retention', 'recipient_evidence_days', 36525),
                     ('retention', 'attempt_evidence_days', 36525),
                     ('retention', 'observation_days', 36525),
                     ('retention', 'job_facts_days', 36525)) AS l (grp, key, top)
        JOIN (VALUES ('poll_schedule'), ('retry'), ('retention')) AS g (name) ON g.name = l.grp
        UNION ALL
        SELECT format('%s[%s].%s', lists.name, item.n - 1, l.key), item.value -> l.key, l.top
        FROM (VALUES ('frequency_caps'), ('rate_limits')) AS lists (name)
        CROSS JOIN LATERAL jsonb_array_elements(
            CASE WHEN jsonb_typeof(doc -> lists.name) = 'array' THEN doc -> lists.name
                 ELSE '[]'::jsonb END) WITH ORDINALITY AS item (value, n)
        CROSS JOIN (VALUES ('limit', 1000000000), ('per_seconds', 31622400)) AS l (key, top)
        WHERE jsonb_typeof(item.value) = 'object'
        UNION ALL
        SELECT format('country_spend_limits.%s.%s.%s', ch.key, co.key, l.key), co.value -> l.key,
               l.top
        FROM jsonb_each(CASE WHEN jsonb_typeof(doc -> 'country_spend_limits') = 'object'
                             THEN doc -> 'country_spend_limits' ELSE '{}'::jsonb END) AS ch
        CROSS JOIN LATERAL jsonb_each(CASE WHEN jsonb_typeof(ch.value) = 'object'
                                           THEN ch.value ELSE '{}'::jsonb END) AS co
        CROSS JOIN (VALUES ('segments', 1000000000), ('per_seconds', 31622400)) AS l (key, top)
        WHERE jsonb_typeof(co.value) = 'object'
    )
    SELECT path FROM limits
    WHERE jsonb_typeof(value) = 'number' AND (value #>> '{}')::numeric > top
    ORDER BY path LIMIT 1
$$;

-- A stored policy past a limit (published before the limits existed, or
-- written around them) is quarantined, not deleted: intents and jobs name
-- its version, and the audit keeps it. A quarantined version is never
-- current, so the tenant's newest sound version (or none: POLICY_MISSING)
-- decides new intents; what was frozen on it is quarantined by the loop
-- that reads it (store/isolation.py).
ALTER TABLE policies ADD COLUMN quarantine_code text, ADD COLUMN quarantined_at timestamptz;

-- What a shared loop (lease recovery, recording, job preparation, alert
-- evaluation, the purge, event pushes) could not handle for one tenant and
-- set aside so it could go on for everyone else: counted and alerted per
-- tenant (the `quarantined` alert). `error` is the kind of error only, never
-- its message, which may quote a tenant's value.
CREATE TABLE quarantine_log (
    tenant_id   text        NOT NULL,
    id          bigint      GENERATED ALWAYS AS IDENTITY,
    loop        text        NOT NULL,
    subject     text        NOT NULL,
    code        text        NOT NULL,
    error       text        NOT NULL,
    at          timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX quarantine_log_recent ON quarantine_log (at);

INSERT INTO quarantine_log (tenant_id, loop, subject, code, error, at)
SELECT tenant_id, 'migration', 'policy:' || version, 'POLICY_OUT_OF_BOUNDS',
       policy_out_of_bounds(document), now()
FROM policies WHERE policy_out_of_bounds(document) IS NOT NULL;

UPDATE policies SET quarantine_code = 'POLICY_OUT_OF_BOUNDS', quarantined_at = now()
WHERE policy_out_of_bounds(document) IS NOT NULL;

-- A job whose preparation failed on its own rows or policy: left
-- `preparing`, no longer picked (jobs.sql claim_preparing_job), and
-- cancelable, so the jobs behind it are prepared.
ALTER TABLE jobs ADD COLUMN quarantine_code text;
