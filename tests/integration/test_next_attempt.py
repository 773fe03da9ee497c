"""When will it go? A rescheduled intent shows its next time: the intent's
`next_attempt_at`, its decision's `retry_after`, and the timeline entry of
the deferral."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient

from tidings import ManualClock, Tidings
from tidings.store.contacts import ConsentRecord

from .api_support import auth, client, new_key
from .dispatch_helpers import offer, publish_offer_template, simulator, worker

EIGHT_AM_NEW_YORK = datetime(2026, 6, 2, 12, 0, tzinfo=UTC)


def test_a_quiet_window_deferral_says_when_it_goes(tidings: Tidings, clock: ManualClock) -> None:
    publish_offer_template(tidings)
    clock.set(datetime(2026, 6, 2, 3, 0, tzinfo=UTC))  # 23:00 in New York
    tidings.put_contact(
        "m1", consents=[ConsentRecord("sms", "marketing", "form", clock.now() - timedelta(days=1))]
    )
    intent = offer(
        tidings,
        1,
        purpose="marketing",
        recipient={"ref": "m1", "phone": "+14155550123", "timezone": "America/New_York"},
        expires_at=clock.now() + timedelta(days=2),
    )
    http: TestClient = client(tidings)
    http.headers.update(auth(new_key(tidings, tidings.tenant)))
    fresh = http.get(f"/v1/intents/{intent.id}").json()
    assert fresh["decision"]["retry_after"] is None  # nothing decided yet
    worker(tidings, simulator(clock)).dispatch_once()
    view = http.get(f"/v1/intents/{intent.id}").json()
    assert view["decision"]["code"] == "QUIET_WINDOW"
    assert datetime.fromisoformat(view["next_attempt_at"]) == EIGHT_AM_NEW_YORK
    assert datetime.fromisoformat(view["decision"]["retry_after"]) == EIGHT_AM_NEW_YORK
    entries = http.get(f"/v1/intents/{intent.id}/timeline").json()["entries"]
    defer = [e for e in entries if e["detail"].get("code") == "QUIET_WINDOW"][-1]
    assert datetime.fromisoformat(defer["detail"]["input"]["next_attempt_at"]) == EIGHT_AM_NEW_YORK
    library = [e for e in tidings.timeline(intent.id) if e.detail.get("code") == "QUIET_WINDOW"]
    assert library[-1].detail["input"]["next_attempt_at"] == EIGHT_AM_NEW_YORK.isoformat()


def test_a_provider_429_says_when_it_goes(tidings: Tidings, clock: ManualClock) -> None:
    publish_offer_template(tidings)
    intent = offer(tidings, 2)
    core = simulator(clock, rate_429=1.0, retry_after_seconds=30)
    worker(tidings, core).dispatch_once()
    got = tidings.get(intent.id)
    http: TestClient = client(tidings)
    http.headers.update(auth(new_key(tidings, tidings.tenant)))
    view = http.get(f"/v1/intents/{intent.id}").json()
    assert view["state"] in ("pending", "resend_due"), view
    assert got.next_due_at is not None and got.next_due_at > clock.now()
    assert datetime.fromisoformat(view["next_attempt_at"]) == got.next_due_at
    assert datetime.fromisoformat(view["decision"]["retry_after"]) == got.next_due_at
    entries = http.get(f"/v1/intents/{intent.id}/timeline").json()["entries"]
    deferred = [e for e in entries if "next_attempt_at" in e["detail"].get("input", {})]
    assert (
        deferred
        and datetime.fromisoformat(deferred[-1]["detail"]["input"]["next_attempt_at"])
        == got.next_due_at
    )


def test_the_console_shows_the_next_attempt(tidings: Tidings, clock: ManualClock) -> None:
    from tests.security.test_console_session import browser, sign_in

    publish_offer_template(tidings)
    clock.set(datetime(2026, 6, 2, 3, 0, tzinfo=UTC))
    tidings.put_contact(
        "m1", consents=[ConsentRecord("sms", "marketing", "form", clock.now() - timedelta(days=1))]
    )
    intent = offer(
        tidings,
        1,
        purpose="marketing",
        recipient={"ref": "m1", "phone": "+14155550123", "timezone": "America/New_York"},
        expires_at=clock.now() + timedelta(days=2),
    )
    worker(tidings, simulator(clock)).dispatch_once()
    http = browser(tidings)
    assert sign_in(http, new_key(tidings, tidings.tenant)).status_code in (302, 303)
    page = http.get(f"/console/intents/{intent.id}")
    assert page.status_code == 200, page.text
    assert "Next attempt" in page.text and "next_attempt_at" in page.text
