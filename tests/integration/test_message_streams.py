"""Seed 003: "separating transactional and promotional streams": a
marketing opt-out and a security notice are not interchangeable, and the
provider is told which one a message is. The adapters choose the stream
from the message's `purpose` (Postmark's broadcast stream, the promotional
SMS type of AWS and SNS: tests/providers/); here the dispatch path carries
each intent's purpose to the provider request."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tidings import IntentState, ManualClock, Tidings
from tidings.store.contacts import ConsentRecord

from .dispatch_helpers import Listening, offer, publish_offer_template, worker


def test_each_request_tells_the_provider_the_intents_purpose(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    clock.set(datetime(2026, 6, 1, 16, 0, tzinfo=UTC))  # noon in New York
    recipient = {"ref": "m1", "phone": "+14155550123", "timezone": "America/New_York"}
    consent = ConsentRecord("sms", "marketing", "form", clock.now() - timedelta(days=1))
    tidings.put_contact("m1", phone="+14155550123", consents=[consent])
    core = Listening(clock)
    sale = offer(tidings, 1, purpose="marketing", recipient=recipient)
    spot = offer(tidings, 2, recipient=recipient)
    assert worker(tidings, core).dispatch_once() == 2
    purposes = {}
    for intent in (sale, spot):
        [attempt] = tidings.get(intent.id).attempts
        assert tidings.get(intent.id).state is IntentState.ACCEPTED
        [request] = [r for r in core.received if r["idempotency_key"] == attempt.attempt_key]
        purposes[intent.id] = request["metadata"]["purpose"]
    assert purposes == {sale.id: "marketing", spot.id: "transactional"}
