"""The sentence beside a final state that would read as "nothing was sent"."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import pytest

from tidings.domain.intent import Attempt, Intent
from tidings.domain.state_words import state_note
from tidings.domain.states import AttemptState, IntentState

AT = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)


def attempt(state: AttemptState, *, called: bool = True) -> Attempt:
    return Attempt(
        tenant_id="t",
        intent_id=uuid4(),
        n=1,
        attempt_key="k:1",
        channel="sms",
        state=state,
        provider="simulator",
        provider_message_id=None,
        code=None,
        segments=1,
        encoding="GSM-7",
        created_at=AT,
        accepted_at=None,
        last_status_at=None,
        terminal_at=None,
        call_started_at=AT if called else None,
    )


def intent(state: IntentState, *attempts: Attempt) -> Intent:
    values: dict[str, Any] = {f.name: None for f in fields(Intent)}  # what the note never reads
    values.update(
        tenant_id="t", id=uuid4(), idempotency_key="k", channel="sms", state=state, version=3,
        recipient_ref="m1", template_name="offer", variables={}, purpose="transactional",
        event_class="offer", resend_budget=0, attempt_count=len(attempts), created_by="test",
        created_at=AT, updated_at=AT, attempts=attempts,
    )  # fmt: skip
    return Intent(**values)


def test_a_cancel_after_delivery_says_the_message_was_delivered() -> None:
    note = state_note(intent(IntentState.CANCELED, attempt(AttemptState.DELIVERED)))
    assert note == "canceled after the message was delivered: a cancel cannot unsend it"


@pytest.mark.parametrize(
    ("state", "words"),
    [
        (AttemptState.ACCEPTED, "was accepted by the provider"),
        (AttemptState.UNKNOWN, "may have been sent"),
        (AttemptState.SENDING, "may have been sent"),
    ],
)
def test_every_final_state_that_hides_a_send_says_so(state: AttemptState, words: str) -> None:
    for final in (IntentState.CANCELED, IntentState.EXPIRED, IntentState.FAILED):
        note = state_note(intent(final, attempt(AttemptState.FAILED), attempt(state)))
        assert note is not None and note.startswith(f"{final.value} after the message {words}")


def test_nothing_to_add_when_nothing_went_out_or_the_state_says_it() -> None:
    assert state_note(intent(IntentState.CANCELED)) is None
    assert state_note(intent(IntentState.CANCELED, attempt(AttemptState.FAILED))) is None
    never_called = attempt(AttemptState.SENDING, called=False)
    assert state_note(intent(IntentState.CANCELED, never_called)) is None
    delivered = attempt(AttemptState.DELIVERED)
    assert state_note(intent(IntentState.DELIVERED, delivered)) is None
    assert state_note(intent(IntentState.ACCEPTED, attempt(AttemptState.ACCEPTED))) is None
