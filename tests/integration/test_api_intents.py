"""The intents, templates, policies, controls and health endpoints over HTTP."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tidings import ManualClock, Tidings
from tidings.cli.devstack import free_port
from tidings.policies import builtin_document

from .api_support import (
    client,
    count,
    intent_body,
    is_problem,
)
from .dispatch_helpers import simulator, worker


def test_create_answers_201_then_200_for_a_replay_and_409_for_another_body(
    api: TestClient, tidings: Tidings
) -> None:
    body = intent_body(tidings)
    first = api.post("/v1/intents", json=body)
    assert first.status_code == 201, first.text
    created = first.json()
    assert created["state"] == "pending" and created["version"] == 1
    assert created["warnings"] == [] and "Tidings-Warning" not in first.headers
    assert created["policy_version"] == "default-1" and created["template_revision"] == 1
    assert created["template"] == {"name": "waitlist_offer", "revision": 1}
    replay = api.post("/v1/intents", json=body)
    assert replay.status_code == 200 and replay.json() == created
    other = api.post(
        "/v1/intents", json={**body, "variables": {"class_name": "Yoga", "deadline": "9"}}
    )
    is_problem(other, 409, "IDEMPOTENCY_CONFLICT")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"recipient": {"ref": "m-1", "phone": "+1 555"}}, "recipient.phone"),
        ({"channel": "fax"}, "channel"),
        ({"template": {"name": "no_such_template"}}, "template"),
        ({"expires_at": "2020-01-01T00:00:00+00:00"}, "expires_at"),
        ({"expires_at": "2030-01-01T00:00:00"}, "expires_at"),
        ({"idempotency_key": ""}, "idempotency_key"),
        ({"variables": {"x": "nul\x00byte"}}, "variables"),
        ({"unexpected": 1}, "unexpected"),
    ],
)
def test_invalid_input_is_422_with_the_field_and_creates_nothing(
    api: TestClient, tidings: Tidings, db_url: str, change: dict[str, Any], field: str
) -> None:
    problem = is_problem(
        api.post("/v1/intents", json=intent_body(tidings, **change)), 422, "INVALID_INPUT"
    )
    assert problem["field"] == field
    assert count(db_url, "intents") == 0 and count(db_url, "destinations") == 0


def test_get_shows_the_attempt_and_the_ledger_times(
    api: TestClient, tidings: Tidings, clock: ManualClock
) -> None:
    created = api.post("/v1/intents", json=intent_body(tidings)).json()
    assert worker(tidings, simulator(clock)).dispatch_once() == 1
    got = api.get(f"/v1/intents/{created['id']}")
    assert got.status_code == 200
    intent = got.json()
    assert intent["state"] == "accepted" and intent["version"] == 3
    assert intent["channel"] == "sms" and intent["recipient_ref"] == "member-1801"
    assert intent["resend_budget"] == 1 and intent["expires_at"]
    assert intent["decision"] == {
        "code": "ALLOWED",
        "policy_version": "default-1",
        "retry_after": None,
    }
    assert intent["next_attempt_at"] is None  # accepted: nothing is due
    assert intent["created_at"] and intent["accepted_at"] and intent["terminal_at"] is None
    [attempt] = intent["attempts"]
    assert attempt["n"] == 1 and attempt["state"] == "accepted"
    assert attempt["provider"] == "simulator" and attempt["provider_message_id"]
    assert attempt["segments"] == 1 and attempt["encoding"] == "GSM-7"


def test_cancel_answers_the_canceled_intent_then_409_with_the_state(
    api: TestClient, tidings: Tidings
) -> None:
    created = api.post("/v1/intents", json=intent_body(tidings)).json()
    path = f"/v1/intents/{created['id']}/cancel"
    done = api.post(path, json={"reason": "member_left"})
    assert done.status_code == 200, done.text
    assert done.json()["state"] == "canceled" and done.json()["cancel_reason"] == "member_left"
    again = is_problem(api.post(path, json={"reason": "member_left"}), 409, "ALREADY_TERMINAL")
    assert again["state"] == "canceled"
    is_problem(api.post(path, json={"reason": "bored"}), 422, "INVALID_INPUT")


def test_timeline_lists_entries_in_order_with_the_api_key_as_actor(
    api: TestClient, tidings: Tidings
) -> None:
    created = api.post("/v1/intents", json=intent_body(tidings)).json()
    api.post(f"/v1/intents/{created['id']}/cancel", json={"reason": "spot_claimed"})
    timeline = api.get(f"/v1/intents/{created['id']}/timeline").json()
    assert timeline["intent_id"] == created["id"]
    moves = [(e["kind"], e["from"], e["to"], e["event"]) for e in timeline["entries"]]
    assert moves == [
        ("transition", None, "pending", "create"),
        ("transition", "pending", "canceled", "cancel"),
    ]
    assert all(e["actor"].startswith("api:") for e in timeline["entries"])


@pytest.mark.parametrize("intent_id", ["0190f3a1-0000-7000-8000-000000000000", "not-a-uuid"])
def test_an_unknown_intent_is_404(api: TestClient, intent_id: str) -> None:
    for response in (
        api.get(f"/v1/intents/{intent_id}"),
        api.get(f"/v1/intents/{intent_id}/timeline"),
        api.post(f"/v1/intents/{intent_id}/cancel", json={"reason": "operator"}),
    ):
        is_problem(response, 404, "NOT_FOUND")


def test_templates_publish_list_and_report_every_problem(api: TestClient) -> None:
    published = api.post(
        "/v1/templates",
        json={
            "name": "report_notice",
            "channel": "sms",
            "body": "Report {{ name }} is ready",
            "required_variables": ["name"],
        },
    )
    assert published.status_code == 201, published.text
    assert published.json()["name"] == "report_notice" and published.json()["revision"] == 1
    bad = api.post(
        "/v1/templates",
        json={
            "name": "9bad",
            "channel": "fax",
            "body": "{{ unclosed",
            "required_variables": [],
        },
    )
    problem = is_problem(bad, 422, "INVALID_INPUT")
    codes = {e["code"] for e in problem["errors"]}
    assert {"INVALID_NAME", "INVALID_CHANNEL", "SYNTAX_ERROR"} <= codes
    names = {(t["name"], t["revision"]) for t in api.get("/v1/templates").json()["items"]}
    assert names == {("report_notice", 1), ("waitlist_offer", 1)}


def test_policies_publish_and_list(api: TestClient) -> None:
    document = {**builtin_document("default"), "version": "acme-2", "name": "acme"}
    published = api.post("/v1/policies", json=document)
    assert published.status_code == 201, published.text
    assert published.json() == {"version": "acme-2"}
    listed = api.get("/v1/policies").json()
    versions = [p["version"] for p in listed["items"]]
    assert listed["current"] == "acme-2" and versions == ["acme-2", "default-1"]  # the fixture's
    is_problem(api.post("/v1/policies", json={"version": "x"}), 422, "INVALID_INPUT")
    clash = {**document, "resend_budget": 3}
    is_problem(api.post("/v1/policies", json=clash), 409, "CONFLICT")


def test_controls_set_and_list(api: TestClient) -> None:
    killed = api.put(
        "/v1/controls/kill-switch", json={"enabled": True, "scope": {"channel": "sms"}}
    )
    assert killed.status_code == 200, killed.text
    state = killed.json()
    assert state["kind"] == "kill_switch" and state["enabled"] is True
    assert state["scope"] == {
        "channel": "sms",
        "country": None,
        "purpose": None,
        "event_class": None,
    }
    assert state["updated_by"].startswith("api:")
    shadow = api.put("/v1/controls/shadow-mode", json={"enabled": True, "scope": {"country": "de"}})
    assert shadow.json()["scope"] == {
        "channel": None,
        "country": "DE",
        "purpose": None,
        "event_class": None,
    }
    kinds = {(c["kind"], c["enabled"]) for c in api.get("/v1/controls").json()["items"]}
    assert kinds == {("kill_switch", True), ("shadow_mode", True)}
    is_problem(
        api.put("/v1/controls/kill-switch", json={"enabled": True, "scope": {"channel": "fax"}}),
        422,
        "INVALID_INPUT",
    )


def test_health_and_openapi_need_no_key(tidings: Tidings, db_url: str) -> None:
    http = client(tidings)
    assert http.get("/healthz").json() == {"status": "ok"}
    assert "/v1/intents" in http.get("/openapi.json").json()["paths"]
    assert http.get("/docs").status_code == 200
    down = Tidings(db_url, secret_key="x" * 32)
    down.close()
    is_problem(client(down).get("/healthz"), 503, "UNAVAILABLE")


def test_health_reports_a_server_that_refuses_connections_as_unavailable() -> None:
    # An open pool whose server is gone (not a closed pool): the probe must
    # give up within its own timeout and answer, not hang or fail with a 500.
    with Tidings(f"postgresql://postgres@127.0.0.1:{free_port()}/x", secret_key="x" * 32) as gone:
        started = time.monotonic()
        is_problem(client(gone).get("/healthz"), 503, "UNAVAILABLE")
        assert time.monotonic() - started < 10


def test_a_request_while_the_database_is_down_is_a_retryable_503() -> None:
    with Tidings(f"postgresql://postgres@127.0.0.1:{free_port()}/x", secret_key="x" * 32) as gone:
        http = client(gone)
        response = http.post(
            "/v1/intents",
            # Shaped like a key, so it is looked up (a malformed one is refused unread).
            headers={"Authorization": "Bearer tdg_0a1b2c_whatever"},
            json={"idempotency_key": "k"},
        )
        problem = is_problem(response, 503, "UNAVAILABLE")
        assert response.headers["Retry-After"] == "1"
        assert "127.0.0.1" not in problem["detail"]


def test_an_unexpected_error_is_a_bare_500(
    api: TestClient, tidings: Tidings, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*_: object, **__: object) -> None:
        raise RuntimeError("secret detail +14155550123")

    monkeypatch.setattr(Tidings, "get", boom)
    response = api.get("/v1/intents/0190f3a1-0000-7000-8000-000000000000")
    problem = is_problem(response, 500, "INTERNAL")
    assert "secret" not in response.text and "Traceback" not in response.text
    assert problem["title"] == "Internal Server Error"


def test_unknown_routes_and_methods_are_problems(api: TestClient) -> None:
    is_problem(api.get("/v1/nothing-here"), 404, "NOT_FOUND")
    is_problem(api.delete("/v1/intents"), 405, "METHOD_NOT_ALLOWED")
