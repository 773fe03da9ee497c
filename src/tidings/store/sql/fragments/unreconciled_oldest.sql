-- The oldest intent in flight of each row of `c` (tenant_id, event_class,
-- channel), by its current attempt's call (the call-started mark; the
-- claim until the call starts), read from intents_unreconciled (0047). An
-- entry's claim is never later than its call, so the oldest call is among
-- the entries claimed no later than the first entry's call: a few entries,
-- whatever the backlog, and at most the cap of them. Each entry's attempt
-- is one primary-key probe (a subquery, so no plan joins the attempts
-- whole). It ends with `o (oldest_at, oldest_id)`, NULL for a row with
-- nothing in flight.
LEFT JOIN LATERAL (
    SELECT f.at AS oldest_at, f.id AS oldest_id
    FROM (
        SELECT i.id,
               coalesce((SELECT coalesce(a.call_started_at, a.created_at) FROM attempts a
                         WHERE a.tenant_id = i.tenant_id AND a.intent_id = i.id
                           AND a.n = i.attempt_count), i.created_at) AS at
        FROM intents i
        WHERE i.tenant_id = c.tenant_id AND i.event_class = c.event_class
          AND i.channel = c.channel AND i.state IN ('sending', 'accepted', 'reconciling')
          AND coalesce(i.claimed_at, i.created_at) <= (
              SELECT coalesce((SELECT coalesce(fa.call_started_at, fa.created_at)
                               FROM attempts fa
                               WHERE fa.tenant_id = fi.tenant_id AND fa.intent_id = fi.id
                                 AND fa.n = fi.attempt_count), fi.created_at)
              FROM intents fi
              WHERE fi.tenant_id = c.tenant_id AND fi.event_class = c.event_class
                AND fi.channel = c.channel
                AND fi.state IN ('sending', 'accepted', 'reconciling')
              ORDER BY coalesce(fi.claimed_at, fi.created_at)
              LIMIT 1)
        ORDER BY coalesce(i.claimed_at, i.created_at)
        LIMIT %(cap)s
    ) AS f
    ORDER BY f.at, f.id
    LIMIT 1
) AS o ON true
