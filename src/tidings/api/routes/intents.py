"""Intents: create (idempotent), read, cancel, timeline."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Path, Query, Response

from tidings.api.auth import Admission, Reader, Sender, SenderToAdmit
from tidings.api.hop import in_thread
from tidings.api.openapi import NOT_FOUND, WITH_BODY, responses
from tidings.api.problems import Problem
from tidings.api.schemas.cancel import CancelCountsOut, CancelManyIn
from tidings.api.schemas.intents import CancelIn, IntentIn, IntentOut, Timeline, TimelineEntryOut
from tidings.api.schemas.listing import CreateWarning, IntentCreatedOut, IntentPageOut
from tidings.client.base import Recorded
from tidings.domain.ids import uuid7
from tidings.domain.intent import Intent
from tidings.domain.listing import DEFAULT_PAGE, MAX_PAGE
from tidings.domain.policy import POLICY_MISSING_HELP
from tidings.domain.states import IntentState

router = APIRouter(prefix="/v1/intents", tags=["intents"])

MISSING_VARIABLES_EXAMPLE = {
    "type": "urn:tidings:problem:missing-variables",
    "title": "Unprocessable Content",
    "status": 422,
    "detail": "template waitlist_offer@1 needs deadline, which were not given",
    "code": "MISSING_VARIABLES",
    "field": "variables",
    "missing": ["deadline"],
}


@router.post(
    "",
    status_code=201,
    responses=responses(
        *WITH_BODY,
        409,
        extra={
            200: {"model": IntentCreatedOut, "description": "A replay of the key"},
            422: {
                "model": Problem,
                "description": "Invalid input, or required variables missing; nothing created",
                "content": {"application/json": {"example": MISSING_VARIABLES_EXAMPLE}},
            },
            429: {
                "model": Problem,
                "description": (
                    "The tenant's request rate, or (`REQUEST_LIMIT`) a request bound of a "
                    "user-triggered event class; nothing created; retry after `Retry-After`"
                ),
            },
        },
    ),
    summary="Record an intent to notify; a replayed key returns the first",
)
async def create_intent(
    body: IntentIn, sending: SenderToAdmit, response: Response
) -> IntentCreatedOut:
    # Async with one hop for the key check and the create, on one pooled
    # connection: a sync route costs a hop to the thread pool for the
    # handler and another for its response's validation, and a dependency
    # checking the key one more (docs/benchmarks.md, the HTTP path).
    recorded = await in_thread(_admit_and_create, sending, body)
    if not recorded.created:
        response.status_code = 200
    out = IntentCreatedOut(**dict(IntentOut.of(recorded.item)))
    if recorded.item.policy_version is None and recorded.item.decision_code is None:
        # Created under no policy: the claim will deny it (POLICY_MISSING).
        # Said now, in the answer and a header, not only on the timeline.
        response.headers["Tidings-Warning"] = "POLICY_MISSING"
        out.warnings = [CreateWarning(code="POLICY_MISSING", detail=POLICY_MISSING_HELP)]
    return out


IntentId = Annotated[str, Path(description="The intent's id (a UUID)")]


@router.get(
    "",
    responses=responses(422),
    summary="Find intents by key, recipient, event class, state, correlation id or time",
)
def list_intents(
    caller: Reader,
    idempotency_key: Annotated[
        str | None, Query(max_length=256, description="Only the intent with this key")
    ] = None,
    recipient_ref: Annotated[
        str | None, Query(max_length=256, description="Only intents to this recipient")
    ] = None,
    event_class: Annotated[
        str | None, Query(max_length=256, description="Only intents of this event class")
    ] = None,
    state: Annotated[IntentState | None, Query(description="Only intents in this state")] = None,
    correlation_id: Annotated[
        str | None, Query(max_length=256, description="Only intents with this correlation id")
    ] = None,
    created_from: Annotated[
        datetime | None, Query(description="Created at or after this time, with a UTC offset")
    ] = None,
    created_to: Annotated[
        datetime | None, Query(description="Created before this time, with a UTC offset")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Most intents in the page")] = (
        DEFAULT_PAGE
    ),
    cursor: Annotated[
        str | None,
        Query(max_length=200, description="`next_cursor` of the last page; omit for the first"),
    ] = None,
) -> IntentPageOut:
    # Newest first; every filter given must match (docs/finding.md).
    page = caller.tidings.list_intents(
        idempotency_key=idempotency_key,
        recipient_ref=recipient_ref,
        event_class=event_class,
        state=state.value if state else None,
        correlation_id=correlation_id,
        created_from=created_from,
        created_to=created_to,
        limit=limit,
        cursor=cursor,
    )
    return IntentPageOut.of(page)


@router.get("/{intent_id}", responses=responses(NOT_FOUND), summary="One intent and its attempts")
def get_intent(intent_id: IntentId, caller: Reader) -> IntentOut:
    return IntentOut.of(caller.tidings.get(intent_id))


@router.post(
    "/cancel",
    responses=responses(*WITH_BODY),
    summary="Cancel every open intent of an event class, recipient or correlation id",
)
def cancel_matching(body: CancelManyIn, caller: Sender) -> CancelCountsOut:
    counts = caller.tidings.cancel_where(
        body.reason.value,
        event_class=body.event_class,
        recipient_ref=body.recipient_ref,
        correlation_id=body.correlation_id,
        actor=caller.actor,
    )
    return CancelCountsOut(canceled=counts.canceled, already_final=counts.already_final)


@router.post(
    "/{intent_id}/cancel",
    responses=responses(*WITH_BODY, NOT_FOUND, 409),
    summary="Stop any further attempt; 409 with the state when already terminal",
)
def cancel_intent(intent_id: IntentId, body: CancelIn, caller: Sender) -> IntentOut:
    caller.tidings.cancel(intent_id, body.reason.value, actor=caller.actor)
    return IntentOut.of(caller.tidings.get(intent_id))


@router.get("/{intent_id}/timeline", responses=responses(NOT_FOUND), summary="Everything, in order")
def intent_timeline(intent_id: IntentId, caller: Reader) -> Timeline:
    entries = [TimelineEntryOut.of(e) for e in caller.tidings.timeline(intent_id)]
    return Timeline(intent_id=UUID(intent_id), entries=entries)


def _admit_and_create(sending: Admission, body: IntentIn) -> Recorded[Intent]:
    # In autocommit: the key check and the create are one statement each,
    # nothing to hold a transaction open for; keyed by the idempotency key,
    # so safe to run again across a failover. Not `notify`: the API tells a
    # creation (201) from a replay (200), and records the key as the actor.
    # The id is chosen by the first run and kept: a run again that finds it
    # found its own create (a commit whose answer was lost), still a creation.
    chosen: list[UUID] = []

    def create(conn: Any) -> Recorded[Intent]:
        caller = sending.admit(conn)
        if not chosen:
            chosen.append(uuid7(caller.tidings.now()))
        raw: dict[str, Any] = body.model_dump(exclude_none=True)
        return caller.tidings.record_intent(
            actor=caller.actor, conn=conn, intent_id=chosen[0], **raw
        )

    return sending.root.autocommit_again(create)
