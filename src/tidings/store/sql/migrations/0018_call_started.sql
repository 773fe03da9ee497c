-- The durable "call started" mark (DESIGN.md invariant 3). A worker writes
-- it for a group of calls in one statement right before they go out, so
-- after a crash a claim whose call never started is told apart from one
-- whose call is under way: the first is simply due again, under the same
-- attempt; only the second has an unknown outcome to reconcile.
ALTER TABLE attempts ADD COLUMN call_started_at timestamptz;
