"""API keys: created per tenant with scopes, stored only as a hash.

A key reads `tdg_<key_id>_<secret>`. The plaintext is returned once, by
`create_key`, and never stored: only its sha256 is. The key id is not
secret; it names the key in audits (`api:<key_id>`) and for revocation.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from tidings.domain.errors import InvalidInput
from tidings.store import ledger
from tidings.store.database import Row, execute, fetch_all

Conn = psycopg.Connection[Any]

SCOPES = frozenset({"send", "read", "admin", "webhook"})
PREFIX = "tdg"
# 32 random bytes: a plain sha256 is then as strong as any slow KDF.
SECRET_BYTES = 32
MAX_KEY_LENGTH = 200


@dataclass(frozen=True)
class Principal:
    """Who is calling: the tenant a request acts for, and what it may do."""

    tenant_id: str
    key_id: str
    scopes: frozenset[str]

    def allows(self, scope: str) -> bool:
        return scope in self.scopes

    @property
    def actor(self) -> str:
        return f"api:{self.key_id}"


def create_key(
    conn: Conn, tenant: str, scopes: Iterable[str], name: str, *, now: datetime | None = None
) -> tuple[str, str]:
    """A new key for `tenant`: (key_id, plaintext). Show the plaintext once."""
    wanted = _check_scopes(scopes)
    key_id = secrets.token_hex(6)
    plaintext = f"{PREFIX}_{key_id}_{secrets.token_urlsafe(SECRET_BYTES)}"
    ledger.ensure_tenant(conn, tenant)
    execute(
        conn,
        "insert_api_key",
        {
            "tenant_id": tenant,
            "key_id": key_id,
            "key_hash": _hash(plaintext),
            "scopes": sorted(wanted),
            "name": name,
            "now": now,
        },
    )
    return key_id, plaintext


def authenticate(conn: Conn, plaintext: str) -> Principal | None:
    """The principal for a live key, or None for an unknown or revoked one."""
    if not plaintext.startswith(f"{PREFIX}_") or len(plaintext) > MAX_KEY_LENGTH:
        return None
    digest = _hash(plaintext)
    for row in fetch_all(conn, "api_keys_by_hash", {"key_hash": digest}):
        # The index lookup already matched; comparing again in constant time
        # keeps the decision itself free of timing differences.
        if hmac.compare_digest(row["key_hash"], digest):
            return Principal(row["tenant_id"], row["key_id"], frozenset(row["scopes"]))
    return None


def revoke(conn: Conn, tenant: str, key_id: str, *, now: datetime | None = None) -> bool:
    """Revoke a key of `tenant`; False when there was no live key by that id."""
    return execute(conn, "revoke_api_key", {"tenant_id": tenant, "key_id": key_id, "now": now}) > 0


def list_keys(conn: Conn, tenant: str) -> list[Row]:
    return fetch_all(conn, "api_keys_of", {"tenant_id": tenant})


def _check_scopes(scopes: Iterable[str]) -> frozenset[str]:
    wanted = frozenset(scopes)
    if not wanted:
        raise InvalidInput("scopes", "at least one scope is required")
    unknown = sorted(wanted - SCOPES)
    if unknown:
        raise InvalidInput("scopes", f"unknown scope(s) {', '.join(unknown)}")
    return wanted


def _hash(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()
