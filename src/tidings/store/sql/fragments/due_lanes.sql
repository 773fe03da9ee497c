-- The claim's lanes (docs/concepts/lanes.md), shared by claim_due and
-- claim_due_ids so the row-by-row fallback takes the batch the claim
-- would have taken. It ends with `picked (tenant_id, id, place)`: at
-- most %(limit)s due intents of one channel, locked (SKIP LOCKED, so
-- workers share the lanes without waiting), and the order the batch is
-- gated in (`place`): lane by lane, taking turns, so limits that run
-- out part-way through a batch are shared between tenants and jobs too.
--   urgent: intents of no job, up to %(urgent_limit)s shared equally
--           between the tenants that have some, each its oldest due;
--   soon:   jobs' intents whose deadline (a token's life) is within
--           %(horizon)s seconds, the earliest deadline first;
--   bulk:   the rest of the batch shared between the jobs sending now,
--           equal per tenant and, inside a tenant, equal per job, each
--           job's share its oldest due intents;
--   fill:   whatever room a lane left unused, oldest due first.
-- Rows covered by an enabled kill switch or a back-off hold are never
-- taken; a job of a tenant switched off or held as a whole is not even
-- looked into.
waiting AS (
    -- The tenants with single intents waiting, found by skipping through
    -- the lane's index one tenant at a time (a loose index scan): as many
    -- steps as tenants, however many intents each has.
    SELECT (SELECT i.tenant_id FROM intents i
            WHERE i.state IN ('pending', 'resend_due') AND i.job_id IS NULL
              AND i.channel = %(channel)s
            ORDER BY i.tenant_id LIMIT 1) AS tenant_id
    UNION ALL
    SELECT (SELECT i.tenant_id FROM intents i
            WHERE i.state IN ('pending', 'resend_due') AND i.job_id IS NULL
              AND i.channel = %(channel)s AND i.tenant_id > w.tenant_id
            ORDER BY i.tenant_id LIMIT 1)
    FROM waiting w WHERE w.tenant_id IS NOT NULL
),
urgent_tenants AS (
    SELECT tenant_id FROM waiting WHERE tenant_id IS NOT NULL
),
urgent AS (
    SELECT u.tenant_id, u.id, 0 AS lane_order, u.next_due_at,
           row_number() OVER (PARTITION BY u.tenant_id ORDER BY u.next_due_at, u.id) AS turn
    FROM urgent_tenants t
    JOIN LATERAL (
        SELECT i.tenant_id, i.id, i.next_due_at
        FROM intents i
        WHERE i.tenant_id = t.tenant_id
          AND i.state IN ('pending', 'resend_due')
          AND i.job_id IS NULL
          AND i.channel = %(channel)s
          AND i.next_due_at <= %(now)s
          AND NOT EXISTS (
              SELECT 1 FROM controls c
              WHERE c.tenant_id = i.tenant_id AND c.kind = 'kill_switch' AND c.enabled
                AND c.channel IN ('', i.channel) AND c.country IN ('', coalesce(i.country, ''))
                AND c.purpose IN ('', i.purpose) AND c.event_class IN ('', i.event_class))
          AND NOT EXISTS (
              -- A tenant whose own traffic drew the account's back-off answers
              -- waits out its own hold; the others go on (dispatch/backoff.py).
              SELECT 1 FROM provider_backoffs b
              WHERE b.tenant_id = i.tenant_id AND b.account = %(account)s
                AND b.held_until > %(now)s)
        ORDER BY i.next_due_at, i.id
        LIMIT ceil(%(urgent_limit)s::numeric / (SELECT count(*) FROM urgent_tenants))::int
        FOR UPDATE OF i SKIP LOCKED
    ) u ON u.tenant_id = t.tenant_id
),
soon AS (
    SELECT d.tenant_id, d.id, 1 AS lane_order, d.next_due_at,
           row_number() OVER (ORDER BY d.expires_at, d.id) AS turn
    FROM (
        SELECT i.tenant_id, i.id, i.next_due_at, i.expires_at
        FROM intents i
        WHERE i.expires_at IS NOT NULL
          AND i.expires_at <= %(now)s + make_interval(secs => %(horizon)s)
          AND i.state IN ('pending', 'resend_due')
          AND i.job_id IS NOT NULL
          AND i.channel = %(channel)s
          AND i.next_due_at <= %(now)s
          AND NOT EXISTS (
              SELECT 1 FROM controls c
              WHERE c.tenant_id = i.tenant_id AND c.kind = 'kill_switch' AND c.enabled
                AND c.channel IN ('', i.channel) AND c.country IN ('', coalesce(i.country, ''))
                AND c.purpose IN ('', i.purpose) AND c.event_class IN ('', i.event_class))
          AND NOT EXISTS (
              SELECT 1 FROM provider_backoffs b
              WHERE b.tenant_id = i.tenant_id AND b.account = %(account)s
                AND b.held_until > %(now)s)
        ORDER BY i.expires_at, i.id
        LIMIT greatest(%(limit)s - (SELECT count(*) FROM urgent), 0)
        FOR UPDATE OF i SKIP LOCKED
    ) d
),
sending_jobs AS (
    SELECT j.tenant_id, j.id, count(*) OVER (PARTITION BY j.tenant_id) AS tenant_jobs
    FROM jobs j
    WHERE j.status IN ('preparing', 'dispatching')
      AND %(channel)s = ANY (j.channels)
      AND NOT EXISTS (
          SELECT 1 FROM controls c
          WHERE c.tenant_id = j.tenant_id AND c.kind = 'kill_switch' AND c.enabled
            AND c.channel IN ('', %(channel)s) AND c.country = ''
            AND c.purpose = '' AND c.event_class = '')
      AND NOT EXISTS (
          SELECT 1 FROM provider_backoffs b
          WHERE b.tenant_id = j.tenant_id AND b.account = %(account)s
            AND b.held_until > %(now)s)
),
shares AS (
    SELECT s.tenant_id, s.id,
           ceil(greatest(%(limit)s - (SELECT count(*) FROM urgent)
                         - (SELECT count(*) FROM soon), 0)::numeric
                / (s.tenant_jobs * (SELECT count(DISTINCT tenant_id) FROM sending_jobs)))::int
               AS quota
    FROM sending_jobs s
),
bulk AS (
    SELECT b.tenant_id, b.id, 2 AS lane_order, b.next_due_at,
           row_number() OVER (PARTITION BY s.tenant_id, s.id ORDER BY b.next_due_at, b.id) AS turn
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
                AND c.channel IN ('', i.channel) AND c.country IN ('', coalesce(i.country, ''))
                AND c.purpose IN ('', i.purpose) AND c.event_class IN ('', i.event_class))
          AND NOT EXISTS (SELECT 1 FROM soon o WHERE o.tenant_id = i.tenant_id AND o.id = i.id)
        ORDER BY i.next_due_at, i.id
        LIMIT s.quota
        FOR UPDATE OF i SKIP LOCKED
    ) b ON b.tenant_id = s.tenant_id
),
fill AS (
    SELECT i.tenant_id, i.id, 3 AS lane_order, i.next_due_at, 1 AS turn
    FROM intents i
    WHERE i.state IN ('pending', 'resend_due')
      AND i.channel = %(channel)s
      AND i.next_due_at <= %(now)s
      AND NOT EXISTS (
          SELECT 1 FROM controls c
          WHERE c.tenant_id = i.tenant_id AND c.kind = 'kill_switch' AND c.enabled
            AND c.channel IN ('', i.channel) AND c.country IN ('', coalesce(i.country, ''))
            AND c.purpose IN ('', i.purpose) AND c.event_class IN ('', i.event_class))
      AND NOT EXISTS (
          SELECT 1 FROM provider_backoffs b
          WHERE b.tenant_id = i.tenant_id AND b.account = %(account)s
            AND b.held_until > %(now)s)
      AND NOT EXISTS (SELECT 1 FROM urgent u WHERE u.tenant_id = i.tenant_id AND u.id = i.id)
      AND NOT EXISTS (SELECT 1 FROM soon o WHERE o.tenant_id = i.tenant_id AND o.id = i.id)
      AND NOT EXISTS (SELECT 1 FROM bulk k WHERE k.tenant_id = i.tenant_id AND k.id = i.id)
    ORDER BY i.next_due_at, i.id
    LIMIT greatest(%(limit)s - (SELECT count(*) FROM urgent) - (SELECT count(*) FROM soon)
                   - (SELECT count(*) FROM bulk), 0)
    FOR UPDATE OF i SKIP LOCKED
),
picked AS (
    -- The shares are rounded up, so the lanes may offer more rows than the
    -- batch holds (with a batch of one, one per tenant): the batch takes
    -- them in turns, each tenant's (each job's) first, then each one's
    -- second, and within a turn in an order no tenant can choose (a hash
    -- of the intent's id), so a small batch does not always serve the
    -- tenant whose intents are oldest. The rest stay where they are
    -- (locked until this transaction ends, then free for the next claim).
    SELECT tenant_id, id, row_number() OVER (ORDER BY lane_order, turn, md5(id::text)) AS place
    FROM (
        SELECT * FROM urgent UNION ALL SELECT * FROM soon
        UNION ALL SELECT * FROM bulk UNION ALL SELECT * FROM fill
    ) offered
    ORDER BY lane_order, turn, md5(id::text)
    LIMIT %(limit)s
)
