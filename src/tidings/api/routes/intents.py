"""Intents: create (idempotent), read, cancel, timeline."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import psycopg
from fastapi import APIRouter, Response

from tidings.api.auth import Admission, Caller, Reader, Sender, SenderToAdmit
from tidings.api.hop import in_thread
from tidings.api.openapi import NOT_FOUND, WITH_BODY, responses
from tidings.api.problems import Problem
from tidings.api.schemas.cancel import CancelCountsOut, CancelManyIn
from tidings.api.schemas.intents import CancelIn, IntentIn, IntentOut, Timeline, TimelineEntryOut
from tidings.domain.intent import Intent
from tidings.intake.create import create_or_replay
from tidings.intake.request import IntentRequest
from tidings.store import ledger

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
            200: {"model": IntentOut, "description": "A replay of the key"},
            422: {
                "model": Problem,
                "description": "Invalid input, or required variables missing; nothing created",
                "content": {"application/json": {"example": MISSING_VARIABLES_EXAMPLE}},
            },
        },
    ),
    summary="Record an intent to notify; a replayed key returns the first",
)
async def create_intent(body: IntentIn, sending: SenderToAdmit, response: Response) -> IntentOut:
    # Async with one hop for the key check and the create, on one pooled
    # connection: a sync route costs a hop to the thread pool for the
    # handler and another for its response's validation, and a dependency
    # checking the key one more (docs/benchmarks.md, the HTTP path).
    intent, created = await in_thread(_admit_and_create, sending, body)
    if not created:
        response.status_code = 200
    return IntentOut.of(intent)


@router.get("/{intent_id}", responses=responses(NOT_FOUND), summary="One intent and its attempts")
def get_intent(intent_id: str, caller: Reader) -> IntentOut:
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
def cancel_intent(intent_id: str, body: CancelIn, caller: Sender) -> IntentOut:
    caller.tidings.cancel(intent_id, body.reason.value, actor=caller.actor)
    return IntentOut.of(caller.tidings.get(intent_id))


@router.get("/{intent_id}/timeline", responses=responses(NOT_FOUND), summary="Everything, in order")
def intent_timeline(intent_id: str, caller: Reader) -> Timeline:
    entries = [TimelineEntryOut.of(e) for e in caller.tidings.timeline(intent_id)]
    return Timeline(intent_id=UUID(intent_id), entries=entries)


def _admit_and_create(sending: Admission, body: IntentIn) -> tuple[Intent, bool]:
    # In autocommit: the key check and the create are one statement each
    # (see Tidings.notify), nothing to hold a transaction open for; keyed by
    # the idempotency key, so safe to run again across a failover.
    return sending.root.db.statements_again(lambda conn: _create(conn, sending.admit(conn), body))


def _create(conn: psycopg.Connection[Any], caller: Caller, body: IntentIn) -> tuple[Intent, bool]:
    # Not `Tidings.notify`: the API must tell a creation (201) from a replay
    # (200), and records the API key as the actor.
    t = caller.tidings
    raw: dict[str, Any] = body.model_dump(exclude_none=True)
    request = IntentRequest.parse(now=t.clock.now(), **raw)
    waker = t.runtime.waker
    intent, created = create_or_replay(
        conn,
        t.tenant,
        request,
        t.vault,
        t.clock.now(),
        caller.actor,
        t.runtime.intake,
        wake=waker.due if waker else None,
    )
    if not created:  # the first intent as it is now, attempts included
        current = ledger.get_intent(conn, t.tenant, intent.id, with_attempts=True)
        intent = current or intent
    return intent, created
