-- name: insert_console_session
INSERT INTO console_sessions (tenant_id, session_hash, key_id, created_at, expires_at)
VALUES (%(tenant_id)s, %(session_hash)s, %(key_id)s, %(now)s, %(expires_at)s);

-- name: console_session_by_hash
-- A session counts only while its key does: not revoked, not expired.
SELECT s.tenant_id, s.key_id, k.scopes FROM console_sessions s
JOIN api_keys k ON k.tenant_id = s.tenant_id AND k.key_id = s.key_id
WHERE s.session_hash = %(session_hash)s AND s.expires_at > %(now)s
  AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > %(now)s);

-- name: delete_console_session
DELETE FROM console_sessions WHERE session_hash = %(session_hash)s;

-- name: delete_console_sessions_of_key
DELETE FROM console_sessions WHERE tenant_id = %(tenant_id)s AND key_id = %(key_id)s;

-- name: delete_expired_console_sessions
DELETE FROM console_sessions WHERE expires_at <= %(now)s;

-- name: trim_console_sessions_of_key
-- Keep the newest sessions of one key (and always the one just started).
DELETE FROM console_sessions
WHERE tenant_id = %(tenant_id)s AND key_id = %(key_id)s AND session_hash <> %(current)s
  AND session_hash NOT IN (
      SELECT session_hash FROM console_sessions
      WHERE tenant_id = %(tenant_id)s AND key_id = %(key_id)s AND session_hash <> %(current)s
      ORDER BY created_at DESC, session_hash
      LIMIT %(keep_others)s);
