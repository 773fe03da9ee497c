"""Console sessions: a browser signs in once with an API key and then
carries only a random session id.

The id is 256 random bits and only its sha256 is stored (like API keys),
so reading the table signs nobody in. A session lasts at most `ttl` and
never outlives its key: the lookup checks the key is neither revoked nor
expired, and revoking a key deletes its sessions.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta
from typing import Any

import psycopg

from tidings.store.api_keys import Principal
from tidings.store.database import execute, fetch_one

Conn = psycopg.Connection[Any]

SESSION_BYTES = 32
MAX_SESSION_LENGTH = 100
# Signing in again and again with one key keeps only its newest sessions
# (invariant 11: nothing a tenant does grows a shared table without bound).
MAX_SESSIONS_PER_KEY = 20


def start(conn: Conn, principal: Principal, now: datetime, ttl: timedelta) -> str:
    """A new session for `principal`; returns the id, to go in a cookie only."""
    execute(conn, "delete_expired_console_sessions", {"now": now})
    session_id = secrets.token_urlsafe(SESSION_BYTES)
    of_key = {"tenant_id": principal.tenant_id, "key_id": principal.key_id}
    digest = _hash(session_id)
    execute(
        conn,
        "insert_console_session",
        {**of_key, "session_hash": digest, "now": now, "expires_at": now + ttl},
    )
    execute(
        conn,
        "trim_console_sessions_of_key",
        {**of_key, "current": digest, "keep_others": MAX_SESSIONS_PER_KEY - 1},
    )
    return session_id


def principal(conn: Conn, session_id: str, now: datetime) -> Principal | None:
    """Who a live session acts for, with its key's current scopes."""
    if not session_id or len(session_id) > MAX_SESSION_LENGTH:
        return None
    params = {"session_hash": _hash(session_id), "now": now}
    row = fetch_one(conn, "console_session_by_hash", params)
    if row is None:
        return None
    return Principal(row["tenant_id"], row["key_id"], frozenset(row["scopes"]))


def end(conn: Conn, session_id: str) -> None:
    if session_id and len(session_id) <= MAX_SESSION_LENGTH:
        execute(conn, "delete_console_session", {"session_hash": _hash(session_id)})


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()
