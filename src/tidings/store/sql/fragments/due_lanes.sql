-- The claim's lanes (docs/concepts/lanes.md), shared by claim_due and
-- claim_due_ids so the row-by-row fallback takes the batch the claim
-- would have taken. It ends with `picked (tenant_id, id, lane_order,
-- next_due_at)`: at most %(limit)s due intents of one channel,
-- locked (SKIP LOCKED, so workers share the lanes without waiting).
--   urgent: intents of no job, oldest due first, up to %(urgent_limit)s;
--   bulk:   the rest of the batch shared between the jobs sending now,
--           equal per tenant and, inside a tenant, equal per job, each
--           job's share its oldest due intents;
--   fill:   whatever room a lane left unused, oldest due first.
-- Rows covered by an enabled kill switch or a back-off hold are never
-- taken; a job of a tenant switched off or held as a whole is not even
-- looked into.
urgent AS (
    SELECT i.tenant_id, i.id, 0 AS lane_order, i.next_due_at
    FROM intents i
    WHERE i.state IN ('pending', 'resend_due')
      AND i.job_id IS NULL
      AND i.channel = %(channel)s
      AND i.next_due_at <= %(now)s
      AND NOT EXISTS (
          SELECT 1 FROM controls c
          WHERE c.tenant_id = i.tenant_id AND c.kind = 'kill_switch' AND c.enabled
            AND c.channel IN ('', i.channel) AND c.country IN ('', coalesce(i.country, '')))
      AND NOT EXISTS (
          -- A tenant whose own traffic drew the account's back-off answers
          -- waits out its own hold; the others go on (dispatch/backoff.py).
          SELECT 1 FROM provider_backoffs b
          WHERE b.tenant_id = i.tenant_id AND b.account = %(account)s
            AND b.held_until > %(now)s)
    ORDER BY i.next_due_at, i.id
    LIMIT %(urgent_limit)s
    FOR UPDATE OF i SKIP LOCKED
),
sending_jobs AS (
    SELECT j.tenant_id, j.id, count(*) OVER (PARTITION BY j.tenant_id) AS tenant_jobs
    FROM jobs j
    WHERE j.status IN ('preparing', 'dispatching')
      AND %(channel)s = ANY (j.channels)
      AND NOT EXISTS (
          SELECT 1 FROM controls c
          WHERE c.tenant_id = j.tenant_id AND c.kind = 'kill_switch' AND c.enabled
            AND c.channel IN ('', %(channel)s) AND c.country = '')
      AND NOT EXISTS (
          SELECT 1 FROM provider_backoffs b
          WHERE b.tenant_id = j.tenant_id AND b.account = %(account)s
            AND b.held_until > %(now)s)
),
shares AS (
    SELECT s.tenant_id, s.id,
           ceil(greatest(%(limit)s - (SELECT count(*) FROM urgent), 0)::numeric
                / (s.tenant_jobs * (SELECT count(DISTINCT tenant_id) FROM sending_jobs)))::int
               AS quota
    FROM sending_jobs s
),
bulk AS (
    SELECT b.tenant_id, b.id, 1 AS lane_order, b.next_due_at
    FROM shares s
    JOIN LATERAL (
        SELECT i.tenant_id, i.id, i.next_due_at
        FROM intents i
        WHERE i.tenant_id = s.tenant_id
          AND i.job_id = s.id
          AND i.state IN ('pending', 'resend_due')
          AND i.channel = %(channel)s
          AND i.next_due_at <= %(now)s
          AND NOT EXISTS (
              SELECT 1 FROM controls c
              WHERE c.tenant_id = i.tenant_id AND c.kind = 'kill_switch' AND c.enabled
                AND c.channel IN ('', i.channel) AND c.country = coalesce(i.country, ''))
        ORDER BY i.next_due_at, i.id
        LIMIT s.quota
        FOR UPDATE OF i SKIP LOCKED
    ) b ON b.tenant_id = s.tenant_id
),
fill AS (
    SELECT i.tenant_id, i.id, 2 AS lane_order, i.next_due_at
    FROM intents i
    WHERE i.state IN ('pending', 'resend_due')
      AND i.channel = %(channel)s
      AND i.next_due_at <= %(now)s
      AND NOT EXISTS (
          SELECT 1 FROM controls c
          WHERE c.tenant_id = i.tenant_id AND c.kind = 'kill_switch' AND c.enabled
            AND c.channel IN ('', i.channel) AND c.country IN ('', coalesce(i.country, '')))
      AND NOT EXISTS (
          SELECT 1 FROM provider_backoffs b
          WHERE b.tenant_id = i.tenant_id AND b.account = %(account)s
            AND b.held_until > %(now)s)
      AND NOT EXISTS (SELECT 1 FROM urgent u WHERE u.tenant_id = i.tenant_id AND u.id = i.id)
      AND NOT EXISTS (SELECT 1 FROM bulk k WHERE k.tenant_id = i.tenant_id AND k.id = i.id)
    ORDER BY i.next_due_at, i.id
    LIMIT greatest(%(limit)s - (SELECT count(*) FROM urgent) - (SELECT count(*) FROM bulk), 0)
    FOR UPDATE OF i SKIP LOCKED
),
picked AS (
    -- The shares are rounded up, so the lanes may offer a few rows more
    -- than the batch: those stay where they are (locked until this
    -- transaction ends, then free for the next claim).
    SELECT * FROM (
        SELECT * FROM urgent UNION ALL SELECT * FROM bulk UNION ALL SELECT * FROM fill
    ) offered
    ORDER BY lane_order, next_due_at, id
    LIMIT %(limit)s
)
