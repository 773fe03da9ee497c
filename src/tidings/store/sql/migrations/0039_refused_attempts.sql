-- Issue #37: the `provider_refused` alert reads the recent attempts a
-- provider refused for a fault of ours (the request, the sender, the
-- account: domain/feedback.py REFUSALS) each round. An index of those rows
-- alone, by when they failed: a round costs the window's refusals, never
-- the history of attempts.
CREATE INDEX attempts_refused ON attempts (terminal_at)
    WHERE state = 'failed'
      AND code IN ('REQUEST_INVALID', 'SENDER_REJECTED', 'ACCOUNT_RESTRICTED');
