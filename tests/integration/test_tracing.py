"""OpenTelemetry spans from the HTTP create through the claim and the
provider call to the receipt (docs/tracing.md), exported to the SDK's
in-memory exporter: one `tidings.intent_id` ties them together, and no
destination, body, token or key is in any of them."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tidings import IntentState, ManualClock, Tidings
from tidings.domain.errors import IdempotencyConflict
from tidings.platform import tracing

from .api_support import PHONE, intent_body
from .dispatch_helpers import offer, publish_offer_template, simulator, worker

# What the recipient is sent, and who: in no span, attribute or status.
SECRETS = (PHONE, PHONE.removeprefix("+1"), "Spin 7am", "18:00", "A spot opened")


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use(provider)
    yield exporter
    tracing.use(None)
    provider.shutdown()


def named(found: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in found if s.name == name]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def assert_nothing_sensitive(found: Sequence[ReadableSpan], *more: str) -> None:
    for span in found:
        text = repr(
            (span.name, attrs(span), span.status.description, [e.name for e in span.events])
        )
        for secret in (*SECRETS, *more):
            assert secret not in text, (span.name, secret)


def test_create_claim_call_and_receipt_share_the_intent_id(
    tidings: Tidings, api: TestClient, clock: ManualClock, spans: InMemorySpanExporter
) -> None:
    created = api.post("/v1/intents", json=intent_body(tidings))
    assert created.status_code == 201, created.text
    intent_id = created.json()["id"]
    core = simulator(clock, receipt_delay_ms=1000)
    w = worker(tidings, core)
    assert w.dispatch_once() == 1
    clock.advance(10)
    assert w.reconcile_once() == 1
    assert tidings.for_tenant("acme").get(intent_id).state is IntentState.DELIVERED

    found = spans.get_finished_spans()
    [create] = named(found, "intent.create")
    [batch] = named(found, "dispatch.claim")
    [claim] = named(found, "intent.claim")
    [call] = named(found, "provider.call")
    [receipt] = named(found, "receipt.apply")
    for span in (create, claim, call, receipt):
        assert attrs(span)["tidings.intent_id"] == intent_id, span.name
        assert attrs(span)["tidings.tenant_id"] == "acme"
        assert attrs(span)["tidings.channel"] == "sms"
    assert attrs(create)["tidings.created"] is True
    assert attrs(create)["tidings.template_revision"] == "waitlist_offer@1"
    assert attrs(create)["tidings.correlation_id"] == "booking-1"
    assert attrs(batch)["tidings.claimed"] == 1 and "tidings.intent_id" not in attrs(batch)
    assert claim.parent is not None and claim.parent.span_id == batch.context.span_id
    assert attrs(claim)["tidings.attempt"] == 1
    assert attrs(call)["tidings.attempt_key"] == attrs(claim)["tidings.attempt_key"]
    assert attrs(call)["tidings.provider"] == "simulator"
    assert attrs(call)["tidings.outcome"] == "accepted"
    assert attrs(call)["tidings.provider_message_id"]
    assert call.status.status_code is StatusCode.UNSET
    assert attrs(receipt)["tidings.status"] == "delivered"
    assert attrs(receipt)["tidings.effect"] == "intent_delivered"
    assert attrs(receipt)["tidings.attempt_key"] == attrs(call)["tidings.attempt_key"]
    key = api.headers["Authorization"].removeprefix("Bearer ")
    assert_nothing_sensitive(found, key, key.split(".")[-1])


def test_a_provider_rejection_is_an_error_on_its_call_span(
    tidings: Tidings, clock: ManualClock, spans: InMemorySpanExporter
) -> None:
    publish_offer_template(tidings)
    refused = "+14155550000"  # the simulator's INVALID_DESTINATION
    intent = offer(tidings, recipient={"ref": "member-1", "phone": refused})
    worker(tidings, simulator(clock)).dispatch_once()
    assert tidings.get(intent.id).state is IntentState.FAILED
    [call] = named(spans.get_finished_spans(), "provider.call")
    assert attrs(call)["tidings.intent_id"] == str(intent.id)
    assert attrs(call)["tidings.outcome"] == "rejected"
    assert attrs(call)["tidings.code"] == "INVALID_DESTINATION"
    assert call.status.status_code is StatusCode.ERROR
    assert call.status.description == "INVALID_DESTINATION"
    assert_nothing_sensitive(spans.get_finished_spans(), refused, refused.removeprefix("+1"))


def test_a_server_error_is_an_error_too(
    tidings: Tidings, clock: ManualClock, spans: InMemorySpanExporter
) -> None:
    publish_offer_template(tidings)
    offer(tidings)
    worker(tidings, simulator(clock, rate_5xx=1.0)).dispatch_once()
    [call] = named(spans.get_finished_spans(), "provider.call")
    assert call.status.status_code is StatusCode.ERROR
    assert attrs(call)["tidings.outcome"] in ("retryable", "indeterminate")


def test_notify_has_its_create_span_and_a_replay_says_so(
    tidings: Tidings, spans: InMemorySpanExporter
) -> None:
    publish_offer_template(tidings)
    first = offer(tidings)
    again = offer(tidings)
    assert again.id == first.id
    created, replayed = named(spans.get_finished_spans(), "intent.create")
    assert attrs(created)["tidings.intent_id"] == attrs(replayed)["tidings.intent_id"]
    assert attrs(created)["tidings.created"] is True
    assert attrs(replayed)["tidings.created"] is False
    assert_nothing_sensitive(spans.get_finished_spans())


def test_a_refused_create_is_an_error_span_with_its_code(
    tidings: Tidings, spans: InMemorySpanExporter
) -> None:
    publish_offer_template(tidings)
    offer(tidings)
    with pytest.raises(IdempotencyConflict):
        offer(tidings, variables={"class_name": "Yoga", "deadline": "19:00"})
    [_, refused] = named(spans.get_finished_spans(), "intent.create")
    assert refused.status.status_code is StatusCode.ERROR
    assert refused.status.description == "IDEMPOTENCY_CONFLICT"


def test_tracing_off_records_nothing(
    tidings: Tidings, clock: ManualClock, spans: InMemorySpanExporter
) -> None:
    tracing.use(None)
    publish_offer_template(tidings)
    offer(tidings)
    worker(tidings, simulator(clock)).dispatch_once()
    assert spans.get_finished_spans() == ()


def test_tidings_runs_without_opentelemetry_while_off(
    tidings: Tidings, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A module set to None in sys.modules cannot be imported: as if the
    # extra were not installed. Off, nothing asks for it.
    for name in [m for m in sys.modules if m.startswith("opentelemetry")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    assert not tracing.enabled()
    publish_offer_template(tidings)
    intent = offer(tidings)
    worker(tidings, simulator(clock)).dispatch_once()
    assert tidings.get(intent.id).state is IntentState.ACCEPTED
