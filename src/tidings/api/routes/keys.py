"""API keys of the caller's tenant, for admin keys: list, create, revoke.

A key's plaintext is in the answer to its creation and nowhere else; a
listing shows ids, names, scopes and state. A key made here is minted by
the caller's key, its parent: it expires no later than the parent and is
revoked with it (`Tidings.create_api_key`). Every query names the
caller's tenant, so another tenant's key is 404 like a missing one.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path

from tidings.api.auth import Admin
from tidings.api.openapi import WITH_BODY, responses
from tidings.api.schemas.admin import KeyCreated, KeyIn, KeyList, KeyOut, KeyRevoked

router = APIRouter(prefix="/v1/keys", tags=["keys"])
KeyId = Annotated[str, Path(pattern=r"^[0-9a-f]{1,64}$", description="The key's id")]


@router.get("", responses=responses(), summary="This tenant's keys (never the keys themselves)")
def list_keys(caller: Admin) -> KeyList:
    return KeyList(items=[_out(row) for row in caller.tidings.api_keys()])


@router.post(
    "",
    status_code=201,
    responses=responses(*WITH_BODY, 409),
    summary="Create a key, shown once; it expires no later than the key creating it",
)
def create_key(body: KeyIn, caller: Admin) -> KeyCreated:
    key_id, plaintext = caller.tidings.create_api_key(
        body.scopes,
        body.name,
        expires_at=body.expires_at,
        expires_in_seconds=body.expires_in_seconds,
        parent=caller.principal.key_id,
    )
    return KeyCreated(**_out(caller.tidings.api_key(key_id)).model_dump(), key=plaintext)


@router.post(
    "/{key_id}/revoke",
    responses=responses(404, 422),
    summary="Revoke a key now, and every key it minted (and theirs); their console sessions"
    " end too (repeating it is harmless)",
)
def revoke_key(key_id: KeyId, caller: Admin) -> KeyRevoked:
    below = caller.tidings.revoke_api_key(key_id)
    out = _out(caller.tidings.api_key(key_id))
    return KeyRevoked(**out.model_dump(), revoked_descendants=below)


def _out(row: dict[str, Any]) -> KeyOut:
    return KeyOut(
        key_id=row["key_id"],
        parent_key_id=row["parent_key_id"],
        name=row["name"],
        scopes=list(row["scopes"]),
        state=row["state"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
    )
