"""Canceling many at once: a whole job, or a filter (event class, member,
correlation id), each intent by the single cancel's version-checked
transition, in batches."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tidings import Conflict, IntentState, InvalidInput, ManualClock, Tidings
from tidings.client import cancel as cancel_module

from .api_support import intent_body, is_problem
from .dispatch_helpers import offer, publish_offer_template, sends, simulator, worker


def job_request(n: int) -> dict[str, Any]:
    return {
        "idempotency_key": "notice:spin-771",
        "event_class": "class_notice",
        "purpose": "transactional",
        "template": "waitlist_offer",
        "channels": ["sms"],
        "variables": {"class_name": "Spin 7am", "deadline": "18:00"},
        "audience": [{"ref": f"m{i}", "phone": "+14155550123"} for i in range(n)],
    }


def test_a_job_is_canceled_in_batches_and_counts_what_was_final(
    tidings: Tidings, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cancel_module, "BATCH_SIZE", 3)  # several batches
    publish_offer_template(tidings)
    job = tidings.create_job(**job_request(7))
    with pytest.raises(Conflict):  # still preparing: later pages would escape
        tidings.cancel_job(job["id"], "class_canceled")
    tidings.prepare_jobs()
    first = tidings.job_recipients(job["id"], limit=1)["items"][0]
    assert first["state"] == "pending"
    core = simulator(clock)
    counts = tidings.cancel_job(job["id"], "class_canceled")
    assert (counts.canceled, counts.already_final) == (7, 0)
    assert tidings.job(job["id"])["counts"] == {"canceled": 7}
    again = tidings.cancel_job(job["id"], "class_canceled")
    assert (again.canceled, again.already_final) == (0, 7)
    worker(tidings, core).dispatch_once()
    assert sends(core) == []


def test_a_filtered_cancel_moves_only_the_matching_open_intents(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    spin = [offer(tidings, n, event_class="spin-771") for n in range(1, 4)]
    yoga = offer(tidings, 9, event_class="yoga-12")
    core = simulator(clock)
    worker(tidings, core).dispatch_once()  # accepted is still open: no further attempt after
    sent = spin[0].id
    late = offer(tidings, 5, event_class="spin-771")
    counts = tidings.cancel_where("class_canceled", event_class="spin-771")
    assert counts.canceled == 4 and counts.already_final == 0
    assert tidings.get(late.id).state is IntentState.CANCELED
    assert tidings.get(sent).state is IntentState.CANCELED  # accepted: no further attempt
    assert tidings.get(yoga.id).state is IntentState.ACCEPTED
    member = tidings.cancel_where("member_left", recipient_ref=yoga.recipient_ref)
    assert (member.canceled, member.already_final) == (1, 0)
    with pytest.raises(InvalidInput):
        tidings.cancel_where("operator")  # no filter: never "cancel everything"


def test_a_filtered_cancel_walks_its_batches_to_the_end(
    tidings: Tidings, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Batches of 3 over 8 intents of one class created at one instant (the
    # clock stands still): the cursor is (created_at, id), so the ties are
    # ordered by id and none is skipped or read twice.
    monkeypatch.setattr(cancel_module, "BATCH_SIZE", 3)
    publish_offer_template(tidings)
    spin = [offer(tidings, n, event_class="spin-771") for n in range(1, 9)]
    other = offer(tidings, 9, event_class="yoga-12")
    tidings.cancel(spin[4].id, reason="member_left")
    counts = tidings.cancel_where("class_canceled", event_class="spin-771")
    assert (counts.canceled, counts.already_final) == (7, 1)
    assert {tidings.get(i.id).state for i in spin} == {IntentState.CANCELED}
    assert tidings.get(other.id).state is IntentState.PENDING


def test_bulk_cancels_over_http(api: TestClient, tidings: Tidings) -> None:
    ids = []
    for n in range(1, 4):
        body = intent_body(tidings, n, correlation_id="booking-771", event_class="spin-771")
        ids.append(api.post("/v1/intents", json=body).json()["id"])
    api.post(f"/v1/intents/{ids[0]}/cancel", json={"reason": "member_left"})
    answer = api.post(
        "/v1/intents/cancel", json={"reason": "class_canceled", "correlation_id": "booking-771"}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"canceled": 2, "already_final": 1}
    assert {api.get(f"/v1/intents/{i}").json()["state"] for i in ids} == {"canceled"}
    is_problem(api.post("/v1/intents/cancel", json={"reason": "operator"}), 422, "INVALID_INPUT")
    unknown = "01938a4e-0000-7000-8000-000000000000"
    is_problem(
        api.post(f"/v1/jobs/{unknown}/cancel", json={"reason": "operator"}), 404, "NOT_FOUND"
    )
