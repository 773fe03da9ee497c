-- Issue #39. A key minted through the API by another key names that key,
-- its parent: the minted key expires no later than its parent, and
-- revoking a key revokes every key below it. Keys made by an operator (the
-- CLI, `tidings up`) and keys from before this migration have no parent.
ALTER TABLE api_keys ADD COLUMN parent_key_id text;
-- Revocation walks down from a key to the keys it minted.
CREATE INDEX api_keys_children ON api_keys (tenant_id, parent_key_id)
    WHERE parent_key_id IS NOT NULL;
