-- name: scenario_intents
-- One scenario's intents (those of a job, or listed ids) with their keys.
SELECT i.id, i.state, i.decision_code,
       coalesce(array_agg(a.attempt_key) FILTER (WHERE a.attempt_key IS NOT NULL), '{}') AS keys
FROM intents i
LEFT JOIN attempts a ON a.tenant_id = i.tenant_id AND a.intent_id = i.id
WHERE i.tenant_id = %(tenant_id)s
  AND (i.job_id = %(job_id)s::uuid OR i.id = ANY(%(ids)s::uuid[]))
GROUP BY i.id, i.state, i.decision_code;

-- name: next_report_revision
SELECT coalesce(max(revision), 0) + 1 AS next FROM reports
WHERE tenant_id = %(tenant_id)s AND id = %(id)s;

-- name: dump_table_text
-- Every row of the ledger tables as text, for the demo's token scan.
SELECT t::text AS dump FROM intents t
UNION ALL SELECT t::text FROM attempts t
UNION ALL SELECT t::text FROM transitions t
UNION ALL SELECT t::text FROM observations t
UNION ALL SELECT t::text FROM unmatched_observations t
UNION ALL SELECT t::text FROM events t
UNION ALL SELECT t::text FROM jobs t
UNION ALL SELECT t::text FROM job_recipients t;
