-- Retention's four clocks (docs/retention.md), each taken from the policy
-- version the evidence was decided under: receipts (observation_days),
-- attempt evidence (attempt_evidence_days), the recipient decision
-- (recipient_evidence_days; a job's evidence_expires_at) and job facts
-- (job_facts_days; a job's facts_expire_at).

-- name: retention_groups
-- Terminal intents grouped by the policy version whose retention applies.
-- The groups are found by skipping through intents_retention_groups, one
-- index probe per group, and each group's oldest is the first entry of its
-- range: a GROUP BY read every finished intent of every tenant each round
-- (issue 38, tests/integration/test_plan_guard.py).
WITH RECURSIVE g AS (
    (SELECT tenant_id, policy_version FROM intents
     WHERE terminal_at IS NOT NULL AND policy_version IS NOT NULL
     ORDER BY tenant_id, policy_version LIMIT 1)
    UNION ALL
    SELECT n.tenant_id, n.policy_version
    FROM g CROSS JOIN LATERAL (
        SELECT i.tenant_id, i.policy_version FROM intents i
        WHERE i.terminal_at IS NOT NULL AND i.policy_version IS NOT NULL
          AND (i.tenant_id, i.policy_version) > (g.tenant_id, g.policy_version)
        ORDER BY i.tenant_id, i.policy_version LIMIT 1) n
)
SELECT g.tenant_id, g.policy_version,
       (SELECT min(i.terminal_at) FROM intents i
        WHERE i.tenant_id = g.tenant_id AND i.policy_version = g.policy_version
          AND i.terminal_at IS NOT NULL) AS oldest
FROM g;

-- name: snapshot_job_counts
-- A job's final counts, counts by channel and cost are kept on the job
-- before the first of its evidence goes (its attempts carry the cost), so
-- the projection is served whole afterwards. Taken once, when the job is
-- prepared and every intent of it is final: the counts cannot move then.
WITH ready AS (
    SELECT j.tenant_id, j.id FROM jobs j
    WHERE j.tenant_id = %(tenant_id)s AND j.policy_version = %(policy_version)s
      AND j.final_counts IS NULL AND j.status <> 'preparing'
      AND (j.evidence_expires_at < %(now)s
           OR EXISTS (SELECT 1 FROM intents i WHERE i.tenant_id = j.tenant_id
                      AND i.job_id = j.id AND i.terminal_at < %(attempts_before)s))
      AND NOT EXISTS (SELECT 1 FROM intents i WHERE i.tenant_id = j.tenant_id
                      AND i.job_id = j.id AND i.terminal_at IS NULL)
), per_state AS (
    SELECT i.tenant_id, i.job_id, i.channel, i.state, count(*) AS n
    FROM intents i JOIN ready r ON r.tenant_id = i.tenant_id AND r.id = i.job_id
    GROUP BY i.tenant_id, i.job_id, i.channel, i.state
), counts AS (
    SELECT tenant_id, job_id, jsonb_object_agg(state, n) AS counts
    FROM (SELECT tenant_id, job_id, state, sum(n)::bigint AS n FROM per_state
          GROUP BY tenant_id, job_id, state) t
    GROUP BY tenant_id, job_id
), by_channel AS (
    SELECT tenant_id, job_id, jsonb_object_agg(channel, states) AS by_channel
    FROM (SELECT tenant_id, job_id, channel, jsonb_object_agg(state, n) AS states
          FROM per_state GROUP BY tenant_id, job_id, channel) t
    GROUP BY tenant_id, job_id
), cost AS (
    SELECT r.tenant_id, r.id AS job_id,
           jsonb_build_object(
               'attempts', count(a.*),
               'reached_provider', count(a.*) FILTER (WHERE a.accepted_at IS NOT NULL),
               'segments', coalesce(sum(a.segments), 0)) AS cost
    FROM ready r
    JOIN intents i ON i.tenant_id = r.tenant_id AND i.job_id = r.id
    JOIN attempts a ON a.tenant_id = i.tenant_id AND a.intent_id = i.id
    GROUP BY r.tenant_id, r.id
)
UPDATE jobs j
SET final_counts = coalesce(c.counts, '{}'::jsonb),
    final_counts_by_channel = coalesce(b.by_channel, '{}'::jsonb),
    final_cost = coalesce(k.cost, '{"attempts": 0, "reached_provider": 0, "segments": 0}'::jsonb),
    updated_at = %(now)s
FROM ready r
LEFT JOIN counts c ON c.tenant_id = r.tenant_id AND c.job_id = r.id
LEFT JOIN by_channel b ON b.tenant_id = r.tenant_id AND b.job_id = r.id
LEFT JOIN cost k ON k.tenant_id = r.tenant_id AND k.job_id = r.id
WHERE j.tenant_id = r.tenant_id AND j.id = r.id;

-- name: job_evidence_due
SELECT 1 FROM jobs
WHERE tenant_id = %(tenant_id)s AND policy_version = %(policy_version)s
  AND evidence_expires_at < %(now)s AND final_counts IS NOT NULL
  AND EXISTS (SELECT 1 FROM intents i WHERE i.tenant_id = jobs.tenant_id AND i.job_id = jobs.id)
LIMIT 1;

-- name: purge_observations_of
-- Receipts of final intents past their policy's observation clock, among
-- the intents of one range of ids (a month kept whole, or none).
WITH doomed AS (
    SELECT o.tenant_id, o.intent_id, o.id FROM observations o
    JOIN intents i ON i.tenant_id = o.tenant_id AND i.id = o.intent_id
    WHERE i.tenant_id = %(tenant_id)s AND i.policy_version = %(policy_version)s
      AND o.intent_id >= %(low)s AND o.intent_id < %(high)s
      AND i.terminal_at IS NOT NULL AND o.received_at < %(before)s
    LIMIT %(limit)s
)
DELETE FROM observations o USING doomed d
WHERE o.tenant_id = d.tenant_id AND o.intent_id = d.intent_id AND o.id = d.id;

-- name: purge_observations_default
-- Receipts of final intents past their policy's observation clock among
-- those the default partition holds: of intents in no month, and late
-- receipts of intents whose month's partition is gone already. Driven by
-- that partition, which stays small, never by the group's intents.
WITH doomed AS (
    SELECT o.tenant_id, o.intent_id, o.id FROM observations_default o
    JOIN intents i ON i.tenant_id = o.tenant_id AND i.id = o.intent_id
    WHERE o.tenant_id = %(tenant_id)s AND i.policy_version = %(policy_version)s
      AND i.terminal_at IS NOT NULL AND o.received_at < %(before)s
    LIMIT %(limit)s
)
DELETE FROM observations o USING doomed d
WHERE o.tenant_id = d.tenant_id AND o.intent_id = d.intent_id AND o.id = d.id;

-- name: purge_attempt_evidence
-- Attempts, transitions and events of final intents past the attempt
-- clock, among the intents of one range of ids (a month kept whole); the
-- intent (the recipient decision) stays, marked, until its own clock.
SELECT intents, attempts FROM purge_attempt_evidence_of(%(tenant_id)s, ARRAY(
    SELECT id FROM intents
    WHERE tenant_id = %(tenant_id)s AND policy_version = %(policy_version)s
      AND terminal_at IS NOT NULL AND attempts_purged_at IS NULL
      AND id >= %(low)s AND id < %(high)s
      AND terminal_at < %(before)s
      -- a job's cost is read from its attempts: they wait for its snapshot
      AND (job_id IS NULL OR EXISTS (SELECT 1 FROM jobs j WHERE j.tenant_id = intents.tenant_id
                                     AND j.id = intents.job_id AND j.final_counts IS NOT NULL))
    LIMIT %(limit)s
    FOR UPDATE), %(now)s);

-- name: purge_attempt_evidence_default
-- The same for the intents whose evidence the default partitions hold: of
-- no month, or kept when their month was dropped. Driven by that
-- partition, which stays small, never by the group's intents.
SELECT intents, attempts FROM purge_attempt_evidence_of(%(tenant_id)s, ARRAY(
    SELECT i.id
    FROM (SELECT DISTINCT intent_id FROM transitions_default
          WHERE tenant_id = %(tenant_id)s) k
    JOIN intents i ON i.tenant_id = %(tenant_id)s AND i.id = k.intent_id
    WHERE i.policy_version = %(policy_version)s
      AND i.terminal_at IS NOT NULL AND i.attempts_purged_at IS NULL
      AND i.terminal_at < %(before)s
      AND (i.job_id IS NULL OR EXISTS (SELECT 1 FROM jobs j WHERE j.tenant_id = i.tenant_id
                                       AND j.id = i.job_id AND j.final_counts IS NOT NULL))
    LIMIT %(limit)s
    FOR UPDATE OF i), %(now)s);

-- name: purge_intents
-- Recipient decisions past their clock: a job's at its evidence_expires_at,
-- a single intent's recipient_evidence_days after it ended; whatever
-- evidence is left goes with it, in one statement.
WITH doomed AS (
    SELECT i.tenant_id, i.id FROM intents i
    LEFT JOIN jobs j ON j.tenant_id = i.tenant_id AND j.id = i.job_id
    WHERE i.tenant_id = %(tenant_id)s AND i.policy_version = %(policy_version)s
      AND i.terminal_at IS NOT NULL
      AND CASE WHEN j.evidence_expires_at IS NOT NULL THEN j.evidence_expires_at < %(now)s
               ELSE i.terminal_at < %(before)s END
      AND (j.id IS NULL OR j.final_counts IS NOT NULL)
    LIMIT %(limit)s
), gone_transitions AS (
    DELETE FROM transitions t USING doomed d
    WHERE t.tenant_id = d.tenant_id AND t.intent_id = d.id
), gone_attempts AS (
    DELETE FROM attempts a USING doomed d
    WHERE a.tenant_id = d.tenant_id AND a.intent_id = d.id
), gone_observations AS (
    DELETE FROM observations o USING doomed d
    WHERE o.tenant_id = d.tenant_id AND o.intent_id = d.id
), gone_events AS (
    DELETE FROM events e USING doomed d
    WHERE e.tenant_id = d.tenant_id AND e.intent_id = d.id
)
DELETE FROM intents i USING doomed d
WHERE i.tenant_id = d.tenant_id AND i.id = d.id;

-- name: purge_observations
-- Receipts that matched no intent, at the shortest observation clock.
DELETE FROM unmatched_observations WHERE received_at < %(before)s;

-- name: purge_expired_uploads
-- An uploaded audience past its expiry, used or not, goes with its members
-- (and their encrypted destinations) by the cascade.
DELETE FROM audience_uploads WHERE expires_at < %(now)s;

-- name: purge_job_recipients
DELETE FROM job_recipients r USING jobs j
WHERE r.tenant_id = j.tenant_id AND r.job_id = j.id AND j.evidence_expires_at < %(now)s
  AND j.final_counts IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM intents i WHERE i.tenant_id = j.tenant_id AND i.job_id = j.id);

-- name: purge_jobs
-- A job's own facts, past their clock, once nothing of its recipients is left.
DELETE FROM jobs j
WHERE j.facts_expire_at < %(now)s
  AND NOT EXISTS (SELECT 1 FROM intents i WHERE i.tenant_id = j.tenant_id AND i.job_id = j.id)
  AND NOT EXISTS (SELECT 1 FROM job_recipients r
                  WHERE r.tenant_id = j.tenant_id AND r.job_id = j.id);

-- name: purge_orphan_destinations
-- A destination nothing refers to any more is deleted with its ciphertext.
DELETE FROM destinations d
WHERE NOT EXISTS (SELECT 1 FROM intents i WHERE i.tenant_id = d.tenant_id
                  AND i.destination_hash = d.destination_hash)
  AND NOT EXISTS (SELECT 1 FROM contacts c WHERE c.tenant_id = d.tenant_id
                  AND d.destination_hash IN (c.phone_hash, c.email_hash))
  AND NOT EXISTS (SELECT 1 FROM job_recipients r WHERE r.tenant_id = d.tenant_id
                  AND d.destination_hash IN (r.phone_hash, r.email_hash));

-- name: month_attempt_evidence_kept
-- Intents of the month whose attempts, transitions or events must stay (at
-- most `most` of them): not final yet, ended within their policy's attempt
-- clock, or a job's intents whose job has no final counts yet (its cost is
-- read from them). Each tenant's intents of the month are one range of its
-- primary key.
WITH clocks AS (
    SELECT * FROM jsonb_to_recordset(%(clocks)s::jsonb)
         AS c (tenant_id text, policy_version text, days int)
)
SELECT k.id
FROM tenants t
CROSS JOIN LATERAL (
    SELECT i.id FROM intents i
    LEFT JOIN clocks c ON c.tenant_id = i.tenant_id AND c.policy_version = i.policy_version
    WHERE i.tenant_id = t.tenant_id AND i.id >= %(low)s AND i.id < %(high)s
      AND i.attempts_purged_at IS NULL
      AND (i.terminal_at IS NULL
           OR i.terminal_at >= %(now)s - make_interval(days => coalesce(c.days, %(default_days)s))
           OR (i.job_id IS NOT NULL AND NOT EXISTS (
                   SELECT 1 FROM jobs j WHERE j.tenant_id = i.tenant_id AND j.id = i.job_id
                     AND j.final_counts IS NOT NULL)))
    LIMIT %(most)s
) k
LIMIT %(most)s;

-- name: month_observations_kept
-- Intents of the month whose receipts must stay (at most `most` of them,
-- an intent possibly twice): not final yet, or with a receipt that arrived
-- within its policy's observation clock.
WITH clocks AS (
    SELECT * FROM jsonb_to_recordset(%(clocks)s::jsonb)
         AS c (tenant_id text, policy_version text, days int)
)
(SELECT k.id
 FROM tenants t
 CROSS JOIN LATERAL (
     SELECT i.id FROM intents i
     WHERE i.tenant_id = t.tenant_id AND i.id >= %(low)s AND i.id < %(high)s
       AND i.terminal_at IS NULL
     LIMIT %(most)s) k
 LIMIT %(most)s)
UNION ALL
(SELECT o.intent_id
 FROM observations o
 JOIN intents i ON i.tenant_id = o.tenant_id AND i.id = o.intent_id
 LEFT JOIN clocks c ON c.tenant_id = i.tenant_id AND c.policy_version = i.policy_version
 WHERE o.intent_id >= %(low)s AND o.intent_id < %(high)s
   -- no clock is longer: most of a due month is ruled out unjoined
   AND o.received_at >= %(now)s - make_interval(days => %(longest_days)s)
   AND o.received_at >= %(now)s - make_interval(days => coalesce(c.days, %(default_days)s))
 LIMIT %(most)s);

-- name: purge_rate_counters
-- Rate windows that ended before `before`, a batch at a time: what the
-- limits and the request-anomaly baseline no longer read.
DELETE FROM rate_counters c
WHERE c.ctid = ANY (ARRAY(
    SELECT r.ctid FROM rate_counters r WHERE r.window_end < %(before)s LIMIT %(limit)s
));
