"""Policy versions in PostgreSQL: immutable once published.

An intent freezes the version that was current when it was created, and
every later decision about it uses that version, so a policy change never
silently changes the meaning of messages already in flight.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import psycopg

from tidings.domain.errors import Conflict, InvalidInput, PolicyUnreadable, ValueOutOfRange
from tidings.domain.policy_document import Policy, PolicyError, PolicyLimitError, parse_policy
from tidings.store.database import Row, fetch_all, fetch_one

Conn = psycopg.Connection[Any]

_cache: dict[tuple[str, str], Policy] = {}
_lock = threading.Lock()


def publish(
    conn: Conn, tenant_id: str, document: Mapping[str, Any], now: datetime, actor: str
) -> Policy:
    try:
        policy = parse_policy(document)
    except PolicyLimitError as exc:
        raise ValueOutOfRange(exc.field, _message(exc)) from None
    except PolicyError as exc:
        raise InvalidInput(exc.field, _message(exc)) from None
    existing = fetch_one(
        conn, "policy_by_version", {"tenant_id": tenant_id, "version": policy.version}
    )
    if existing is not None:
        if existing["document"] != dict(document):
            raise Conflict(f"policy version {policy.version} exists with other content")
        return policy
    params = {
        "tenant_id": tenant_id,
        "version": policy.version,
        "name": policy.name,
        "document": dict(document),
        "now": now,
        "actor": actor,
    }
    fetch_one(conn, "insert_policy", params)
    return policy


def _message(exc: PolicyError) -> str:
    # InvalidInput puts the field in front again.
    return str(exc).split(":", 1)[-1].strip()


def current(conn: Conn, tenant_id: str) -> Policy | None:
    """The tenant's newest version; None when it has published none.

    Nothing is published on the tenant's behalf: deny-by-default means a
    tenant without a policy is denied (POLICY_MISSING), never given one that
    allows everything.
    """
    row = fetch_one(conn, "current_policy", {"tenant_id": tenant_id})
    return current_from(tenant_id, row or {})


def current_from(tenant_id: str, row: Mapping[str, Any]) -> Policy | None:
    """`current` from a row already read (`version`, `document`, maybe NULL)."""
    if row.get("version") is None:
        return None
    return _parsed(tenant_id, row["version"], row["document"])


def by_version(conn: Conn, tenant_id: str, version: str) -> Policy:
    with _lock:
        cached = _cache.get((tenant_id, version))
    if cached is not None:
        return cached
    row = fetch_one(conn, "policy_by_version", {"tenant_id": tenant_id, "version": version})
    if row is None:
        raise PolicyUnreadable(tenant_id, version, "not stored")
    if row["quarantine_code"] is not None:
        raise PolicyUnreadable(tenant_id, version, f"quarantined ({row['quarantine_code']})")
    return _parsed(tenant_id, version, row["document"])


def _parsed(tenant_id: str, version: str, document: Mapping[str, Any]) -> Policy:
    with _lock:
        policy = _cache.get((tenant_id, version))
        if policy is not None:
            return policy
    try:
        parsed = parse_policy(document)
    except PolicyError as exc:
        # Stored around the publish checks; the field only, never the value.
        raise PolicyUnreadable(tenant_id, version, f"refused at {exc.field}") from None
    with _lock:
        return _cache.setdefault((tenant_id, version), parsed)


def versions(conn: Conn, tenant_id: str) -> list[Row]:
    """The tenant's published versions, newest first."""
    return fetch_all(conn, "policies_list", {"tenant_id": tenant_id})


def document_of(conn: Conn, tenant_id: str, version: str) -> dict[str, Any] | None:
    """The document of one version as published; None for a version never published."""
    row = fetch_one(conn, "policy_by_version", {"tenant_id": tenant_id, "version": version})
    return None if row is None else dict(row["document"])
