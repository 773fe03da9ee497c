-- The durable "call started" mark (DESIGN.md invariant 3). A worker writes
-- it for a group of calls in one statement right before they go out, so
-- after a crash a claim whose call never started is told apart from one
-- whose call is under way: the first is simply due again, under the same
-- attempt; only the second has an unknown outcome to reconcile.
ALTER TABLE attempts ADD COLUMN call_started_at timestamptz;

-- Calls that started and have no provider id yet: what a list search
-- must rule out before it names a message as one attempt's (dispatch/lookup.py).
CREATE INDEX attempts_open_calls ON attempts (provider, call_started_at)
    WHERE provider_message_id IS NULL AND state IN ('sending', 'unknown')
      AND call_started_at IS NOT NULL;
