-- name: job_counts_of_job
-- One job's kept numbers (migrations/0033_job_counts.sql): its stripes
-- summed, a read bounded by the job's few rows, never by its audience.
SELECT channel, state, code, sum(intents)::bigint AS intents, sum(attempts)::bigint AS attempts,
       sum(retries)::bigint AS retries, sum(reached_provider)::bigint AS reached_provider,
       sum(segments)::bigint AS segments, sum(retained_bytes)::bigint AS retained_bytes,
       max(updated_at) AS updated_at
FROM job_counts WHERE tenant_id = %(tenant_id)s AND job_id = %(job_id)s
GROUP BY channel, state, code;

-- name: job_state_counts_of_jobs
-- Intents per state of a page of jobs (the console's jobs page), kept.
SELECT job_id, state, sum(intents)::bigint AS n FROM job_counts
WHERE tenant_id = %(tenant_id)s AND job_id = ANY(%(job_ids)s) AND state <> ''
GROUP BY job_id, state HAVING sum(intents) <> 0;

