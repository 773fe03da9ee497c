-- name: attempts_of
SELECT * FROM attempts WHERE tenant_id = %(tenant_id)s AND intent_id = %(id)s ORDER BY n;

-- name: timeline
-- Everything known about one intent, in the order it happened.
SELECT at, kind, from_state, to_state, event, actor, policy_version, detail
FROM (
    SELECT t.at, 'transition' AS kind, t.from_state, t.to_state, t.event, t.actor,
           t.policy_version,
           jsonb_strip_nulls(jsonb_build_object(
               'version', t.version, 'code', t.decision_code, 'input', t.input)) AS detail,
           0 AS tiebreak, t.id AS seq
    FROM transitions t
    WHERE t.tenant_id = %(tenant_id)s AND t.intent_id = %(id)s
    UNION ALL
    SELECT a.created_at, 'attempt', NULL, a.state, 'attempt_' || a.n, 'worker', NULL,
           jsonb_strip_nulls(jsonb_build_object(
               'n', a.n, 'provider', a.provider, 'provider_message_id', a.provider_message_id,
               'attempt_key', a.attempt_key, 'code', a.code, 'segments', a.segments,
               'encoding', a.encoding, 'accepted_at', a.accepted_at,
               'last_status_at', a.last_status_at)),
           1, a.n
    FROM attempts a
    WHERE a.tenant_id = %(tenant_id)s AND a.intent_id = %(id)s
    UNION ALL
    SELECT coalesce(o.occurred_at, o.received_at), 'observation', NULL, o.status,
           o.source, 'provider:' || o.provider, NULL,
           jsonb_strip_nulls(jsonb_build_object(
               'attempt', o.attempt_n, 'raw_status', o.raw_status, 'code', o.code,
               'effect', o.effect, 'received_at', o.received_at)),
           2, o.id
    FROM observations o
    WHERE o.tenant_id = %(tenant_id)s AND o.intent_id = %(id)s
    UNION ALL
    -- What retention took, so a short timeline is never mistaken for a
    -- short history (docs/retention.md).
    -- Row by row (attempts_purged_at), or with its whole month's partitions
    -- (unless its rows were kept apart: its creation is still audited).
    SELECT coalesce(i.attempts_purged_at, m.attempts_dropped_at), 'retention', NULL, NULL,
           'attempt_evidence_purged', 'retention', i.policy_version,
           '{"removed": ["attempts", "transitions", "events"]}'::jsonb, 3, 0
    FROM intents i
    LEFT JOIN evidence_months m
           ON i.id >= m.lower_id AND i.id < m.upper_id AND m.attempts_dropped_at IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM transitions t
                          WHERE t.tenant_id = i.tenant_id AND t.intent_id = i.id)
    WHERE i.tenant_id = %(tenant_id)s AND i.id = %(id)s
      AND coalesce(i.attempts_purged_at, m.attempts_dropped_at) IS NOT NULL
) entries
ORDER BY at, tiebreak, seq;
