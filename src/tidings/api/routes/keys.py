"""API keys of the caller's tenant, for admin keys: list, create, revoke.

A key's plaintext is in the answer to its creation and nowhere else; a
listing shows ids, names, scopes and state. A key made here is minted by
the caller's key, its parent: it expires no later than the parent and is
revoked with it (store/api_keys.py). Every query names the
caller's tenant, so another tenant's key is 404 like a missing one.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Path

from tidings.api.auth import Admin, Caller
from tidings.api.openapi import WITH_BODY, responses
from tidings.api.schemas.admin import KeyCreated, KeyIn, KeyList, KeyOut, KeyRevoked
from tidings.domain.errors import InvalidInput, NotFound
from tidings.store import api_keys
from tidings.store.database import Row

router = APIRouter(prefix="/v1/keys", tags=["keys"])
KeyId = Annotated[str, Path(pattern=r"^[0-9a-f]{1,64}$", description="The key's id")]


@router.get("", responses=responses(), summary="This tenant's keys (never the keys themselves)")
def list_keys(caller: Admin) -> KeyList:
    return KeyList(items=[_out(caller, row) for row in _rows(caller)])


@router.post(
    "",
    status_code=201,
    responses=responses(*WITH_BODY, 409),
    summary="Create a key, shown once; it expires no later than the key creating it",
)
def create_key(body: KeyIn, caller: Admin) -> KeyCreated:
    now = caller.tidings.clock.now()
    if body.expires_at is not None and body.expires_in_seconds is not None:
        raise InvalidInput("expires_at", "give expires_at or expires_in_seconds, not both")
    expires_at = body.expires_at
    if body.expires_in_seconds is not None:
        expires_at = now + timedelta(seconds=body.expires_in_seconds)
    with caller.tidings.db.transaction() as conn:
        key_id, plaintext = api_keys.create_key(
            conn,
            caller.tenant,
            body.scopes,
            body.name,
            now=now,
            expires_at=expires_at,
            parent=caller.principal.key_id,
            vault=caller.tidings.vault,
        )
    row = _row(caller, key_id)
    return KeyCreated(**_out(caller, row).model_dump(), key=plaintext)


@router.post(
    "/{key_id}/revoke",
    responses=responses(404, 422),
    summary="Revoke a key now, and every key it minted (and theirs); their console sessions"
    " end too (repeating it is harmless)",
)
def revoke_key(key_id: KeyId, caller: Admin) -> KeyRevoked:
    with caller.tidings.db.transaction() as conn:
        api_keys.revoke(conn, caller.tenant, key_id, now=caller.tidings.clock.now())
        below = api_keys.descendants(conn, caller.tenant, key_id)
    out = _out(caller, _row(caller, key_id))
    return KeyRevoked(**out.model_dump(), revoked_descendants=below)


def _rows(caller: Caller) -> list[Row]:
    with caller.tidings.db.transaction() as conn:
        return api_keys.list_keys(conn, caller.tenant)


def _row(caller: Caller, key_id: str) -> Row:
    with caller.tidings.db.transaction() as conn:
        row = api_keys.get_key(conn, caller.tenant, key_id)
    if row is None:
        raise NotFound(f"no API key {key_id!r}")
    return row


def _out(caller: Caller, row: Row) -> KeyOut:
    return KeyOut(
        key_id=row["key_id"],
        parent_key_id=row["parent_key_id"],
        name=row["name"],
        scopes=list(row["scopes"]),
        state=api_keys.state_of(row, caller.tidings.clock.now()),
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
    )
