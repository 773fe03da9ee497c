"""API keys: created per tenant with scopes, stored only as a hash.

A key reads `tdg_<key_id>_<secret>`. The plaintext is returned once, by
`create_key`, and never stored: only an HMAC-SHA256 of it is, keyed by a
key derived from TIDINGS_SECRET_KEY (`Vault.api_key_hash`), so the table
alone cannot confirm a guessed key. Keys stored before as a plain sha256
still authenticate, and are rehashed the first time they do; while that
fallback stays, a row written in the old form is accepted too. The key id is not
secret; it names the key in audits (`api:<key_id>`) and for revocation.
A key may carry an expiry; revoking a key also ends its console sessions.
A key minted by another key records it as its parent: it expires no later
than its parent, and revoking a key revokes every key below it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any, Literal

import psycopg

from tidings.domain.errors import Conflict, InvalidInput
from tidings.domain.moments import check_moment
from tidings.platform.vault import Vault
from tidings.store import ledger
from tidings.store.database import Row, execute, fetch_all, fetch_one

Conn = psycopg.Connection[Any]

SCOPES = frozenset({"send", "read", "admin", "webhook"})
PREFIX = "tdg"
# 32 random bytes: a fast hash is then as strong as any slow KDF.
SECRET_BYTES = 32
MAX_KEY_LENGTH = 200
_KEY_SHAPE = re.compile(rf"^{PREFIX}_([0-9a-f]{{1,64}})_[A-Za-z0-9_-]+$")
# A tenant's usable keys are bounded (invariant 11): an admin key cannot
# fill the shared table. Revoked and expired keys do not count.
MAX_USABLE_KEYS_PER_TENANT = 1000
KeyState = Literal["live", "expired", "revoked"]
KEYED_HASH_PREFIX = "hmac-sha256:"


class TooManyKeys(Conflict):
    code = "TOO_MANY_KEYS"


class ParentKeyGone(Conflict):
    """The key minting another was revoked or expired meanwhile."""

    code = "KEY_REVOKED"


class Refusal(Enum):
    """Why a presented key does not authenticate; each has a stable API code."""

    UNKNOWN = "UNAUTHENTICATED"
    REVOKED = "KEY_REVOKED"
    EXPIRED = "KEY_EXPIRED"


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
    conn: Conn,
    tenant: str,
    scopes: Iterable[str],
    name: str,
    *,
    now: datetime | None = None,
    expires_at: datetime | None = None,
    parent: str | None = None,
    vault: Vault,
) -> tuple[str, str]:
    """A new key for `tenant`: (key_id, plaintext). Show the plaintext once.

    `parent` is the key minting it, if a key does (`POST /v1/keys`): the new
    key then expires no later than its parent (with no expiry asked for, it
    takes the parent's; a later one is refused), and it is revoked with its
    parent. Call inside a transaction: the parent stays locked until the new
    key commits."""
    wanted = _check_scopes(scopes)
    at = now or datetime.now(UTC)
    if expires_at is not None:
        check_expiry(expires_at, at)
    if parent is not None:
        expires_at = _within_parent(conn, tenant, parent, expires_at, at)
    usable = fetch_one(conn, "count_usable_api_keys", {"tenant_id": tenant, "now": at})
    if usable is not None and usable["n"] >= MAX_USABLE_KEYS_PER_TENANT:
        raise TooManyKeys(
            f"tenant {tenant!r} has {MAX_USABLE_KEYS_PER_TENANT} usable keys; revoke some first"
        )
    key_id = secrets.token_hex(6)
    plaintext = f"{PREFIX}_{key_id}_{secrets.token_urlsafe(SECRET_BYTES)}"
    ledger.ensure_tenant(conn, tenant)
    execute(
        conn,
        "insert_api_key",
        {
            "tenant_id": tenant,
            "key_id": key_id,
            "key_hash": _keyed_hash(plaintext, vault),
            "scopes": sorted(wanted),
            "name": name,
            "now": now,
            "expires_at": expires_at,
            "parent_key_id": parent,
        },
    )
    return key_id, plaintext


def _within_parent(
    conn: Conn, tenant: str, parent: str, expires_at: datetime | None, now: datetime
) -> datetime | None:
    """The expiry a key minted by `parent` gets: the one asked for, or the
    parent's when none was; one past the parent's is refused rather than
    shortened, so a caller never holds a key that ends sooner than it said."""
    row = fetch_one(conn, "lock_parent_api_key", {"tenant_id": tenant, "key_id": parent})
    if row is None or state_of(row, now) != "live":
        raise ParentKeyGone(f"the key {parent!r} minting this one is revoked or expired")
    limit: datetime | None = row["expires_at"]
    if limit is None:
        return expires_at
    if expires_at is None:
        return limit
    if expires_at > limit:
        raise InvalidInput(
            "expires_at",
            f"must not be after {limit.astimezone(UTC).isoformat()}, when the key minting"
            " this one (its parent) expires",
        )
    return expires_at


def check_expiry(expires_at: datetime, now: datetime) -> datetime:
    """An expiry a key may carry: with an offset, before 9000 (invariant 11),
    and in the future."""
    check_moment("expires_at", expires_at)
    if expires_at <= now:
        raise InvalidInput("expires_at", "must be in the future")
    return expires_at


def key_id_of(plaintext: str) -> str | None:
    """The key id a presented key names, without the database; None when
    it is not shaped like one of our keys (then it is unknown, unread)."""
    if len(plaintext) > MAX_KEY_LENGTH:
        return None
    found = _KEY_SHAPE.match(plaintext)
    return found.group(1) if found else None


def check(conn: Conn, plaintext: str, now: datetime, vault: Vault) -> Principal | Refusal:
    """The principal for a live key, or why the key is refused.

    One indexed read: it runs on every API request. A key still stored as
    a plain sha256 (made before keyed hashes) is rehashed by a second
    statement, once.
    """
    if key_id_of(plaintext) is None:
        return Refusal.UNKNOWN
    keyed, legacy = _keyed_hash(plaintext, vault), _legacy_hash(plaintext)
    for row in fetch_all(conn, "api_keys_by_hash", {"key_hashes": [keyed, legacy]}):
        # The index lookup already matched; comparing again in constant time
        # keeps the decision itself free of timing differences.
        if hmac.compare_digest(row["key_hash"], legacy):
            _rehash(conn, row, keyed)
        elif not hmac.compare_digest(row["key_hash"], keyed):
            continue
        if row["revoked_at"] is not None:
            return Refusal.REVOKED
        if row["expires_at"] is not None and row["expires_at"] <= now:
            return Refusal.EXPIRED
        return Principal(row["tenant_id"], row["key_id"], frozenset(row["scopes"]))
    return Refusal.UNKNOWN


def _rehash(conn: Conn, row: Row, keyed: str) -> None:
    params = {"tenant_id": row["tenant_id"], "key_id": row["key_id"]}
    execute(conn, "rehash_api_key", {**params, "key_hash": keyed, "old_hash": row["key_hash"]})


def authenticate(
    conn: Conn, plaintext: str, vault: Vault, now: datetime | None = None
) -> Principal | None:
    """The principal for a live key, or None for an unknown, revoked or expired one."""
    found = check(conn, plaintext, now or datetime.now(UTC), vault)
    return found if isinstance(found, Principal) else None


def revoke(conn: Conn, tenant: str, key_id: str, *, now: datetime | None = None) -> bool:
    """Revoke a key of `tenant` and every key below it (the keys it minted,
    theirs, ...), and end their console sessions; False when there was no
    live key by that id. Call inside a transaction."""
    params = {"tenant_id": tenant, "key_id": key_id, "now": now}
    revoked = execute(conn, "revoke_api_key", params)
    # A key minted while this runs waited on its parent's lock (see
    # `create_key`) and is visible only to a later statement: repeat until
    # one finds nothing left, so nothing minted below escapes.
    while execute(conn, "revoke_api_key_descendants", params) > 0:
        pass
    ended = [key_id, *descendants(conn, tenant, key_id)]
    execute(conn, "delete_console_sessions_of_keys", {"tenant_id": tenant, "key_ids": ended})
    return revoked > 0


def descendants(conn: Conn, tenant: str, key_id: str) -> list[str]:
    """The ids of every key below `key_id`: minted by it, or by those, ..."""
    rows = fetch_all(conn, "api_key_descendants", {"tenant_id": tenant, "key_id": key_id})
    return [row["key_id"] for row in rows]


def list_keys(conn: Conn, tenant: str | None = None) -> list[Row]:
    """The keys of `tenant` (every tenant's when None: operators only)."""
    if tenant is None:
        return fetch_all(conn, "api_keys_all", {})
    return fetch_all(conn, "api_keys_of", {"tenant_id": tenant})


def get_key(conn: Conn, tenant: str, key_id: str) -> Row | None:
    return fetch_one(conn, "api_key_of", {"tenant_id": tenant, "key_id": key_id})


def state_of(row: Row, now: datetime) -> KeyState:
    """live, expired or revoked: what a listing shows for a key row."""
    if row["revoked_at"] is not None:
        return "revoked"
    if row["expires_at"] is not None and row["expires_at"] <= now:
        return "expired"
    return "live"


def tenants_with_key(conn: Conn, key_id: str) -> list[str]:
    return [row["tenant_id"] for row in fetch_all(conn, "api_key_tenants", {"key_id": key_id})]


def _check_scopes(scopes: Iterable[str]) -> frozenset[str]:
    wanted = frozenset(scopes)
    if not wanted:
        raise InvalidInput("scopes", "at least one scope is required")
    unknown = sorted(wanted - SCOPES)
    if unknown:
        raise InvalidInput("scopes", f"unknown scope(s) {', '.join(unknown)}")
    return wanted


def _keyed_hash(plaintext: str, vault: Vault) -> str:
    """Marked, so that keys still stored the old way can be counted:
    `SELECT count(*) FROM api_keys WHERE key_hash NOT LIKE 'hmac-sha256:%'`."""
    return f"{KEYED_HASH_PREFIX}{vault.api_key_hash(plaintext)}"


def _legacy_hash(plaintext: str) -> str:
    """How keys were stored before keyed hashes: recognised, never written."""
    return hashlib.sha256(plaintext.encode()).hexdigest()
