"""API keys, scopes, tenant isolation, body limits and what responses leak."""

from __future__ import annotations

import json
from collections.abc import Iterator

import psycopg
import pytest
from fastapi.testclient import TestClient

from tidings import Tidings
from tidings.api.app import create_app
from tidings.api.settings import ApiSettings
from tidings.store import api_keys

from .api_support import (
    EMAIL,
    PHONE,
    auth,
    client,
    count,
    intent_body,
    is_problem,
    new_key,
    publish_offer,
)

INTENT_PATHS = ("/v1/intents/{id}", "/v1/intents/{id}/timeline")


@pytest.fixture
def http(tidings: Tidings) -> TestClient:
    for tenant in ("acme", "globex"):
        publish_offer(tidings, tenant)
    return client(tidings)


def test_a_missing_wrong_or_revoked_key_is_401(http: TestClient, tidings: Tidings) -> None:
    key = new_key(tidings, "acme")
    assert http.get("/v1/templates", headers=auth(key)).status_code == 200
    missing = http.get("/v1/templates")
    is_problem(missing, 401, "UNAUTHENTICATED")
    assert missing.headers["www-authenticate"].startswith("Bearer")
    for header in (f"Bearer {key}x", "Bearer tdg_nope_nope", f"Basic {key}", "Bearer"):
        is_problem(
            http.get("/v1/templates", headers={"Authorization": header}), 401, "UNAUTHENTICATED"
        )
    key_id = key.split("_")[1]
    with tidings.db.transaction() as conn:
        assert api_keys.revoke(conn, "acme", key_id) is True
        assert api_keys.revoke(conn, "acme", key_id) is False
    is_problem(http.get("/v1/templates", headers=auth(key)), 401, "KEY_REVOKED")


@pytest.mark.parametrize("body", [b"[1, 2]", b"", b'{"idempotency_key": 5}'])
def test_a_create_checks_the_key_before_its_body(
    http: TestClient, tidings: Tidings, body: bytes
) -> None:
    """`POST /v1/intents` checks the key in its own hop (api/auth.py,
    `Admission`); a body that fails validation first must still get the
    key's answer, so a caller without a valid key learns nothing of it."""
    key, reader = new_key(tidings, "acme"), new_key(tidings, "acme", ["read"])
    revoked = new_key(tidings, "acme")
    with tidings.db.transaction() as conn:
        api_keys.revoke(conn, "acme", revoked.split("_")[1])

    def post(*header: str) -> object:
        headers = {"Content-Type": "application/json"}
        headers.update({"Authorization": header[0]} if header else {})
        return http.post("/v1/intents", content=body, headers=headers)

    is_problem(post(), 401, "UNAUTHENTICATED")
    is_problem(post("Bearer tdg_nope_nope"), 401, "UNAUTHENTICATED")
    is_problem(post(f"Bearer {revoked}"), 401, "KEY_REVOKED")
    is_problem(post(f"Bearer {reader}"), 403, "FORBIDDEN")
    is_problem(post(f"Bearer {key}"), 422, "INVALID_INPUT")
    with TestClient(
        create_app(tidings, settings=ApiSettings(api_rate_per_second=1, api_rate_burst=1)),
        raise_server_exceptions=False,
    ) as limited:
        headers = {**auth(key), "Content-Type": "application/json"}
        answers = [limited.post("/v1/intents", content=body, headers=headers) for _ in range(2)]
    is_problem(answers[0], 422, "INVALID_INPUT")  # admitted: the one token of the burst
    is_problem(answers[1], 429, "RATE_LIMITED")


def test_keys_are_stored_only_as_hashes(tidings: Tidings, db_url: str) -> None:
    key = new_key(tidings, "acme", ["read"])
    assert key.startswith("tdg_") and len(key) > 50
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT row_to_json(k)::text FROM api_keys k").fetchall()
    assert len(rows) == 1 and key not in rows[0][0] and key.split("_", 2)[2] not in rows[0][0]
    with tidings.db.transaction() as conn:
        principal = api_keys.authenticate(conn, key, tidings.vault)
    assert principal is not None
    assert principal.tenant_id == "acme" and principal.scopes == frozenset({"read"})


def test_unknown_scopes_are_refused(tidings: Tidings) -> None:
    with pytest.raises(ValueError, match="scope"), tidings.db.transaction() as conn:
        api_keys.create_key(conn, "acme", ["read", "root"], "bad", vault=tidings.vault)


def test_another_tenants_intent_is_404_exactly_like_a_missing_one(
    http: TestClient, tidings: Tidings
) -> None:
    acme, globex = new_key(tidings, "acme"), new_key(tidings, "globex")
    theirs = http.post("/v1/intents", json=intent_body(tidings), headers=auth(acme)).json()["id"]
    missing = "0190f3a1-0000-7000-8000-000000000000"
    for path in INTENT_PATHS:
        foreign = http.get(path.format(id=theirs), headers=auth(globex))
        absent = http.get(path.format(id=missing), headers=auth(globex))
        assert foreign.status_code == absent.status_code == 404
        assert foreign.json() == json.loads(absent.text.replace(missing, theirs))
    cancel = http.post(
        f"/v1/intents/{theirs}/cancel", json={"reason": "operator"}, headers=auth(globex)
    )
    is_problem(cancel, 404, "NOT_FOUND")
    assert http.get(f"/v1/intents/{theirs}", headers=auth(acme)).json()["state"] == "pending"


def test_the_same_key_in_two_tenants_makes_two_intents(http: TestClient, tidings: Tidings) -> None:
    body = intent_body(tidings)
    ids = {
        http.post("/v1/intents", json=body, headers=auth(new_key(tidings, t))).json()["id"]
        for t in ("acme", "globex")
    }
    assert len(ids) == 2


@pytest.mark.parametrize(
    ("scopes", "method", "path"),
    [
        (["read"], "POST", "/v1/intents"),
        (["read"], "POST", "/v1/intents/0190f3a1-0000-7000-8000-000000000000/cancel"),
        (["send"], "GET", "/v1/intents/0190f3a1-0000-7000-8000-000000000000"),
        (["send"], "GET", "/v1/events"),
        (["send", "read"], "POST", "/v1/templates"),
        (["send", "read"], "GET", "/v1/policies"),
        (["read", "webhook"], "PUT", "/v1/controls/kill-switch"),
    ],
)
def test_a_key_without_the_scope_is_403(
    http: TestClient, tidings: Tidings, db_url: str, scopes: list[str], method: str, path: str
) -> None:
    key = new_key(tidings, "acme", scopes)
    body = (
        intent_body(tidings) if path == "/v1/intents" else {"enabled": True, "reason": "operator"}
    )
    response = http.request(method, path, json=body, headers=auth(key))
    is_problem(response, 403, "FORBIDDEN")
    assert count(db_url, "intents") == 0 and count(db_url, "controls") == 0


def test_an_oversized_body_is_413(http: TestClient, tidings: Tidings, db_url: str) -> None:
    key = new_key(tidings, "acme")
    big = intent_body(tidings, variables={"blob": "x" * 300_000})
    is_problem(http.post("/v1/intents", json=big, headers=auth(key)), 413, "PAYLOAD_TOO_LARGE")

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams
        yield b'{"blob": "'
        for _ in range(40):
            yield b"y" * 10_000
        yield b'"}'

    streamed = http.post("/v1/intents", content=chunks(), headers=auth(key))
    is_problem(streamed, 413, "PAYLOAD_TOO_LARGE")
    assert count(db_url, "intents") == 0


@pytest.mark.parametrize(
    "payload", [b"{not json", b"[1, 2]", b"", b'"text"', b'{"idempotency_key": 5}']
)
def test_a_malformed_body_is_422(http: TestClient, tidings: Tidings, payload: bytes) -> None:
    headers = {**auth(new_key(tidings, "acme")), "Content-Type": "application/json"}
    is_problem(http.post("/v1/intents", content=payload, headers=headers), 422, "INVALID_INPUT")


def test_no_response_contains_a_destination(http: TestClient, tidings: Tidings) -> None:
    key = auth(new_key(tidings, "acme"))
    tidings.for_tenant("acme").publish_template(
        "report_ready", channel="email", body="Your report", subject="Report"
    )
    sms = http.post("/v1/intents", json=intent_body(tidings), headers=key).json()
    email = http.post(
        "/v1/intents",
        headers=key,
        json=intent_body(
            tidings,
            2,
            channel="email",
            template={"name": "report_ready"},
            recipient={"ref": "reader-1", "email": EMAIL},
        ),
    ).json()
    answers = [json.dumps(sms), json.dumps(email)]
    for intent in (sms, email):
        answers.append(http.get(f"/v1/intents/{intent['id']}", headers=key).text)
        answers.append(
            http.post(
                f"/v1/intents/{intent['id']}/cancel", headers=key, json={"reason": "operator"}
            ).text
        )
        answers.append(http.get(f"/v1/intents/{intent['id']}/timeline", headers=key).text)
    answers.append(http.get("/v1/events", headers=key).text)
    bad_phone = intent_body(tidings, 3, recipient={"ref": "m", "phone": "+1415555012345"})
    answers.append(http.post("/v1/intents", json=bad_phone, headers=key).text)
    too_long = intent_body(tidings, 4, recipient={"ref": "m", "phone": PHONE * 3})
    answers.append(http.post("/v1/intents", json=too_long, headers=key).text)
    text = "\n".join(answers).lower()
    for secret in (PHONE, PHONE[2:], EMAIL.lower(), "example.org", "1415555012345"):
        assert secret.lower() not in text
