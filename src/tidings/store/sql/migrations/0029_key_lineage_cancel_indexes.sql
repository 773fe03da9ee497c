-- Issue #39. A key minted through the API by another key names that key,
-- its parent: the minted key expires no later than its parent, and
-- revoking a key revokes every key below it. Keys made by an operator (the
-- CLI, `tidings up`) and keys from before this migration have no parent.
ALTER TABLE api_keys ADD COLUMN parent_key_id text;
-- Revocation walks down from a key to the keys it minted.
CREATE INDEX api_keys_children ON api_keys (tenant_id, parent_key_id)
    WHERE parent_key_id IS NOT NULL;

-- A bulk cancel by event class or correlation id (client_cancel.py) is one
-- request and one rate token; without these it read every intent of its
-- tenant. Keyed by id as well, so its batches walk the matching intents
-- in id order, once per request. (Job and recipient filters have
-- intents_job and intents_recipient.)
CREATE INDEX intents_event_class ON intents (tenant_id, event_class, id);
CREATE INDEX intents_correlation ON intents (tenant_id, correlation_id, id)
    WHERE correlation_id IS NOT NULL;
