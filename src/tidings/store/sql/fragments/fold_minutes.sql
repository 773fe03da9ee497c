-- A fold batch's transitions of the last two hours added to the console
-- chart's per-minute counts (0049); older ones it never shows.
minutes AS (
    INSERT INTO transition_minutes AS c (tenant_id, minute, from_state, to_state, n)
    SELECT b.tenant_id, date_trunc('minute', b.at), coalesce(b.from_state, ''), b.to_state,
           count(*)
    FROM batch b
    WHERE b.at >= now() - interval '2 hours'
    GROUP BY 1, 2, 3, 4
    ORDER BY 1, 2, 3, 4
    ON CONFLICT (tenant_id, minute, from_state, to_state) DO UPDATE SET n = c.n + excluded.n
)
