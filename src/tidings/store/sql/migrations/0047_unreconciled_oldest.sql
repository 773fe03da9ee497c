-- The unreconciled reads at a million (issue 38, item 4; docs/console.md,
-- docs/operations/metrics.md, docs/benchmarks.md): the console's table, the
-- metric and the alert read every intent in flight to find the oldest call
-- and count them. The counts now come from intent_counts (0043); the oldest
-- comes from this index's first entries.
--
-- An intent's age in flight counts from its current attempt's call (the
-- call-started mark; the claim until the call starts), which lives on the
-- attempt. `claimed_at` is the time of the intent's latest claim, written
-- by the same UPDATE that moves it to `sending` (ledger.sql,
-- transition_many), so it costs no row version of its own. The attempt is
-- made at the claim's time and its call starts after it, so claimed_at is
-- never later than the call: walking this index from its first entry, the
-- oldest call is found among the few entries claimed before that first
-- call started (store/sql/fragments/unreconciled_oldest.sql).
--
-- The index replaces intents_unreconciled (event_class, channel,
-- created_at), which no read used any more and which did not start with
-- the tenant: one index in flight before and after, a few bytes wider.
ALTER TABLE intents ADD COLUMN claimed_at timestamptz;

-- Intents in flight now: their current attempt's creation (its claim).
UPDATE intents i SET claimed_at = a.created_at
FROM attempts a
WHERE i.state IN ('sending', 'accepted', 'reconciling')
  AND a.tenant_id = i.tenant_id AND a.intent_id = i.id AND a.n = i.attempt_count;

DROP INDEX intents_unreconciled;
-- coalesce: an intent in flight that never had claimed_at written (none
-- should) still sorts no later than its call, by its creation.
CREATE INDEX intents_unreconciled ON intents
    (tenant_id, event_class, channel, (coalesce(claimed_at, created_at)))
    WHERE state IN ('sending', 'accepted', 'reconciling');
