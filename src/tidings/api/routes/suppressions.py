"""Suppressions: reviewed with their evidence, lifted with a reason that is
kept (issue #37, item 5; docs/providers.md, "Reviewing and lifting
suppressions"). Reading needs `read`; lifting needs `admin`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path, Query

from tidings.api.auth import Admin, Reader
from tidings.api.openapi import NOT_FOUND, responses
from tidings.api.schemas.common import ChannelName, Text
from tidings.api.schemas.suppressions import Reason, SuppressionOut, SuppressionPageOut
from tidings.domain.listing import DEFAULT_PAGE, MAX_PAGE
from tidings.domain.suppressions import MOST_LIFT_REASON

router = APIRouter(prefix="/v1/suppressions", tags=["suppressions"])

SuppressionId = Annotated[str, Path(max_length=64, description="The suppression's id")]


@router.get(
    "",
    responses=responses(422),
    summary="Find suppressions by reason, provider, channel or time, with their evidence",
)
def list_suppressions(
    caller: Reader,
    reason: Annotated[Reason | None, Query(description="Only suppressions for this reason")] = None,
    provider: Annotated[
        Text | None,
        Query(max_length=64, description="Only suppressions this provider's evidence made"),
    ] = None,
    channel: Annotated[
        ChannelName | None, Query(description="Only suppressions on this channel")
    ] = None,
    since: Annotated[
        datetime | None, Query(description="Created at or after this time, with a UTC offset")
    ] = None,
    lifted: Annotated[bool, Query(description="List the lifted suppressions instead")] = False,
    limit: Annotated[
        int, Query(ge=1, le=MAX_PAGE, description="Most suppressions in the page")
    ] = DEFAULT_PAGE,
    cursor: Annotated[
        str | None,
        Query(max_length=200, description="`next_cursor` of the last page; omit for the first"),
    ] = None,
) -> SuppressionPageOut:
    page = caller.tidings.list_suppressions(
        reason=reason,
        provider=provider,
        channel=channel,
        since=since,
        lifted=lifted,
        limit=limit,
        cursor=cursor,
    )
    return SuppressionPageOut.of(page)


@router.get(
    "/{suppression_id}",
    responses=responses(NOT_FOUND),
    summary="One suppression, active or lifted, with its evidence",
)
def get_suppression(suppression_id: SuppressionId, caller: Reader) -> SuppressionOut:
    return SuppressionOut.of(caller.tidings.suppression(suppression_id))


@router.delete(
    "/{suppression_id}",
    responses=responses(NOT_FOUND, 409, 422),
    summary="Lift a suppression, saying why; 409 with when when it was lifted already",
)
def lift_suppression(
    suppression_id: SuppressionId,
    caller: Admin,
    reason: Annotated[
        Text,
        Query(
            min_length=1,
            max_length=MOST_LIFT_REASON,
            description="Why it is lifted; kept with who lifted it and when",
            examples=["suppressed by the old rule: Postmark ErrorCode 300"],
        ),
    ],
) -> SuppressionOut:
    lifted = caller.tidings.lift_suppression(suppression_id, reason=reason, actor=caller.actor)
    return SuppressionOut.of(lifted)
