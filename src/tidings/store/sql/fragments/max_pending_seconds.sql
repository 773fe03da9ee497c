-- How long policy document `pol.document` lets an intent wait unsent, in
-- seconds: retry.max_pending_seconds within its limit (1..31622400,
-- domain/policy_bounds.py), or %(default_seconds)s when it says nothing
-- (or there is no document). Total over any stored document (issue #39):
-- a cast or interval that failed on one tenant's document would stop
-- every tenant's alerts.
CASE WHEN jsonb_typeof(pol.document #> '{retry,max_pending_seconds}') = 'number'
     THEN least(greatest((pol.document #>> '{retry,max_pending_seconds}')::numeric, 1),
                31622400)::float8
     ELSE %(default_seconds)s::float8 END
