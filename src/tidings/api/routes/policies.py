"""Policies: publish immutable versions; list them, newest first."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body

from tidings.api.auth import Admin
from tidings.api.openapi import WITH_BODY, responses
from tidings.api.schemas.admin import PolicyList, PolicyOut, PolicyPublished
from tidings.api.schemas.common import JsonObject

router = APIRouter(prefix="/v1/policies", tags=["policies"])


@router.post(
    "",
    status_code=201,
    responses=responses(*WITH_BODY, 409),
    summary="Publish a policy document; new intents freeze the newest version",
)
def publish_policy(document: Annotated[JsonObject, Body()], caller: Admin) -> PolicyPublished:
    return PolicyPublished(version=caller.tidings.publish_policy(document, actor=caller.actor))


@router.get("", responses=responses(), summary="Published versions, newest first")
def list_policies(caller: Admin) -> PolicyList:
    items = [PolicyOut(**r) for r in caller.tidings.policy_versions()]
    return PolicyList(current=items[0].version if items else None, items=items)
