"""Each decision records the inputs it used besides the policy version
(seed 000: "which input was evaluated, which immutable policy version"):
the consent evidence (or its absence), the recipient time zone, the
frequency-cap counts and the block flags; shown in the timeline."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from fastapi.testclient import TestClient

from tidings import IntentState, ManualClock, Tidings
from tidings.cli.timeline import timeline_table
from tidings.policies import builtin_document
from tidings.store.contacts import ConsentRecord

from .api_support import auth, client, new_key
from .dispatch_helpers import offer, publish_offer_template, simulator, worker

NOON_NEW_YORK = datetime(2026, 6, 1, 16, 0, tzinfo=UTC)
RECIPIENT = {"ref": "m1", "phone": "+14155550123"}


def capped_policy() -> dict[str, Any]:
    doc = copy.deepcopy(builtin_document("default"))
    caps = [{"id": "sms-hourly", "channel": "sms", "limit": 1, "per_seconds": 3600}]
    doc.update(version="inputs-1", frequency_caps=caps)
    return doc


def decision_inputs(t: Tidings, intent_id: Any, code: str) -> dict[str, Any]:
    entries = [e for e in t.timeline(intent_id) if e.detail.get("input", {}).get("code") == code]
    assert entries, f"no decision {code} in the timeline"
    inputs: dict[str, Any] = entries[-1].detail["input"]["decision_inputs"]
    return inputs


def consent_id(db_url: str, evidence_ref: str) -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT id FROM consents WHERE evidence_ref = %s", (evidence_ref,))
        found = row.fetchone()
    assert found is not None
    return int(found[0])


def test_a_send_names_the_consent_evidence_zone_and_cap_count_it_used(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    tidings.publish_policy(capped_policy())
    publish_offer_template(tidings)
    clock.set(NOON_NEW_YORK)
    captured = clock.now() - timedelta(days=1)
    tidings.put_contact(
        "m1",
        phone="+14155550123",
        timezone="America/New_York",
        consents=[ConsentRecord("sms", "marketing", "signup-form", captured, "form:77")],
    )
    w = worker(tidings, simulator(clock))
    first = offer(tidings, 1, purpose="marketing", recipient=RECIPIENT)
    w.dispatch_once()
    assert tidings.get(first.id).state is IntentState.ACCEPTED

    used = decision_inputs(tidings, first.id, "ALLOWED")
    assert used["consent"] == {
        "required": True,
        "found": True,
        "evidence_id": consent_id(db_url, "form:77"),
        "evidence_ref": "form:77",
        "captured_at": captured.isoformat(),
    }
    assert used["timezone"] == {"zone": "America/New_York", "source": "contact"}
    assert used["frequency_caps"] == {"sms-hourly": 0}
    assert used["blocks"] == {"opted_out": False, "suppressed": False}

    second = offer(tidings, 2, purpose="marketing", recipient=RECIPIENT)
    w.dispatch_once()
    assert tidings.get(second.id).decision_code == "RECIPIENT_LIMIT"
    assert decision_inputs(tidings, second.id, "RECIPIENT_LIMIT")["frequency_caps"] == {
        "sms-hourly": 1
    }


def test_a_denial_records_the_absent_consent_and_the_blocks(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    clock.set(NOON_NEW_YORK)
    w = worker(tidings, simulator(clock))
    no_consent = offer(tidings, 1, purpose="marketing", recipient=RECIPIENT)
    w.dispatch_once()
    used = decision_inputs(tidings, no_consent.id, "CONSENT_MISSING")
    assert used["consent"] == {"required": True, "found": False}
    # The number says which zones it may be in; none was given.
    assert used["timezone"]["source"] == "number"
    assert used["timezone"]["candidates"] == ["America/Los_Angeles"]

    tidings.opt_out("sms", "+14155550123")
    blocked = offer(tidings, 2, recipient=RECIPIENT)
    w.dispatch_once()
    used = decision_inputs(tidings, blocked.id, "OPTED_OUT")
    assert used["blocks"] == {"opted_out": True, "suppressed": False}
    assert used["consent"] == {"required": False, "found": False}


def test_the_http_timeline_and_the_cli_show_the_inputs(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    clock.set(NOON_NEW_YORK)
    recipient = {**RECIPIENT, "timezone": "America/Chicago"}
    intent = offer(tidings, 1, recipient=recipient)
    worker(tidings, simulator(clock)).dispatch_once()
    http: TestClient = client(tidings)
    http.headers.update(auth(new_key(tidings, tidings.tenant)))
    entries = http.get(f"/v1/intents/{intent.id}/timeline").json()["entries"]
    allowed = [e for e in entries if e["detail"].get("input", {}).get("code") == "ALLOWED"]
    used = allowed[-1]["detail"]["input"]["decision_inputs"]
    assert used["timezone"] == {"zone": "America/Chicago", "source": "intent"}
    assert used["consent"] == {"required": False, "found": False}
    rendered = str(timeline_table(tidings.timeline(intent.id)).columns[-1]._cells)
    assert "timezone=America/Chicago" in rendered


def test_the_console_timeline_shows_the_inputs(tidings: Tidings, clock: ManualClock) -> None:
    from tests.security.test_console_session import browser, sign_in

    publish_offer_template(tidings)
    clock.set(NOON_NEW_YORK)
    intent = offer(tidings, 1, purpose="marketing", recipient=RECIPIENT)
    worker(tidings, simulator(clock)).dispatch_once()
    http = browser(tidings)
    assert sign_in(http, new_key(tidings, tidings.tenant)).status_code in (302, 303)
    page = http.get(f"/console/intents/{intent.id}")
    assert page.status_code == 200, page.text
    assert "decision_inputs.consent.required" in page.text
    assert "decision_inputs.timezone.candidates" in page.text
    assert "+14155550123" not in page.text


def test_an_exclusion_at_job_preparation_records_its_inputs(
    tidings: Tidings, clock: ManualClock
) -> None:
    tidings.publish_template(
        "notice", channel="sms", body="Notice {{ n }}", required_variables=["n"]
    )
    tidings.opt_out("sms", "+14155550199")
    job = tidings.create_job(
        idempotency_key="notice:inputs",
        event_class="notice",
        purpose="transactional",
        template="notice",
        channels=["sms"],
        variables={"n": "1"},
        audience=[
            {"ref": "open", "phone": "+14155550123", "timezone": "America/Denver"},
            {"ref": "quiet", "phone": "+14155550199"},
        ],
    )
    tidings.prepare_jobs()
    items = {i["recipient_ref"]: i for i in tidings.job_recipients(job["id"])["items"]}
    assert (items["quiet"]["state"], items["quiet"]["code"]) == (
        "no_permitted_channel",
        "OPTED_OUT",
    )
    [created] = [
        e for e in tidings.timeline(items["quiet"]["intent_id"]) if e.event == "create_excluded"
    ]
    used = created.detail["input"]["decision_inputs"]
    assert used["blocks"] == {"opted_out": True, "suppressed": False}
    assert used["consent"] == {"required": False, "found": False}
    [sendable] = [e for e in tidings.timeline(items["open"]["intent_id"]) if e.event == "create"]
    assert "decision_inputs" not in sendable.detail["input"]  # decided again at claim
