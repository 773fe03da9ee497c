-- Claims filter by channel and walk due rows in keyset order; with the
-- channel first in the index the walk stops at the batch size even before
-- the planner has statistics on a freshly flooded table (a sort over the
-- whole backlog otherwise, on every claim).
DROP INDEX intents_due;
CREATE INDEX intents_due ON intents (channel, next_due_at, id)
    WHERE state IN ('pending', 'resend_due');
