"""Issue #20 item 8: API keys can be listed, revoked and can expire, and an
admin key manages only its own tenant's keys, never seeing a key again.

Through the real HTTP app (`create_app`), and the `tidings keys` CLI in
process (typer's runner) against the same test database.
"""

from __future__ import annotations

import re
from datetime import timedelta

import psycopg
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from tests.conftest import TEST_SECRET
from tests.security.key_support import auth, client, is_problem, new_key
from tidings import ManualClock, Tidings
from tidings.cli import app as cli_app
from tidings.store import api_keys


@pytest.fixture
def http(tidings: Tidings) -> TestClient:
    return client(tidings)


def _works(http: TestClient, key: str) -> bool:
    return http.get("/v1/keys", headers=auth(key)).status_code == 200


def test_an_admin_creates_lists_and_revokes_only_its_own_tenants_keys(
    http: TestClient, tidings: Tidings, db_url: str
) -> None:
    acme, globex = new_key(tidings, "acme", ["admin"]), new_key(tidings, "globex", ["admin"])
    made = http.post("/v1/keys", json={"scopes": ["read"], "name": "dashboard"}, headers=auth(acme))
    assert made.status_code == 201, made.text
    created = made.json()
    plaintext, key_id = created["key"], created["key_id"]
    assert plaintext.startswith(f"tdg_{key_id}_") and created["state"] == "live"
    assert http.get("/v1/events", headers=auth(plaintext)).status_code == 200

    listed = http.get("/v1/keys", headers=auth(acme))
    assert {k["name"] for k in listed.json()["items"]} == {"test key for acme", "dashboard"}
    secrets = (plaintext, plaintext.split("_", 2)[2], acme.split("_", 2)[2])
    assert not any(s in listed.text for s in secrets) and '"key"' not in listed.text

    theirs = http.get("/v1/keys", headers=auth(globex)).json()["items"]
    assert [k["name"] for k in theirs] == ["test key for globex"]  # no acme key, not even its id
    # Another tenant's key id is 404 exactly like a missing one, and stays live.
    foreign = http.post(f"/v1/keys/{key_id}/revoke", headers=auth(globex))
    missing = http.post("/v1/keys/0123456789ab/revoke", headers=auth(globex))
    is_problem(foreign, 404, "NOT_FOUND")
    assert foreign.json()["detail"].replace(key_id, "x") == missing.json()["detail"].replace(
        "0123456789ab", "x"
    )
    assert http.get("/v1/events", headers=auth(plaintext)).status_code == 200

    revoked = http.post(f"/v1/keys/{key_id}/revoke", headers=auth(acme))
    assert revoked.status_code == 200 and revoked.json()["state"] == "revoked"
    assert "key" not in revoked.json()
    is_problem(http.get("/v1/events", headers=auth(plaintext)), 401, "KEY_REVOKED")
    again = http.post(f"/v1/keys/{key_id}/revoke", headers=auth(acme))
    assert again.status_code == 200 and again.json()["revoked_at"] == revoked.json()["revoked_at"]
    with psycopg.connect(db_url) as conn:
        stored = conn.execute("SELECT row_to_json(k)::text FROM api_keys k").fetchall()
    assert not any(plaintext in row[0] or secrets[1] in row[0] for row in stored)


@pytest.mark.parametrize("scopes", [["send"], ["read"], ["send", "read", "webhook"]])
def test_only_admin_keys_manage_keys(http: TestClient, tidings: Tidings, scopes: list[str]) -> None:
    key = new_key(tidings, "acme", scopes)
    is_problem(http.get("/v1/keys", headers=auth(key)), 403, "FORBIDDEN")
    made = http.post("/v1/keys", json={"scopes": ["admin"]}, headers=auth(key))
    is_problem(made, 403, "FORBIDDEN")
    key_id = key.split("_")[1]
    is_problem(http.post(f"/v1/keys/{key_id}/revoke", headers=auth(key)), 403, "FORBIDDEN")


def test_a_key_expires_and_then_answers_401_key_expired(
    http: TestClient, tidings: Tidings, clock: ManualClock
) -> None:
    admin = new_key(tidings, "acme", ["admin"])
    made = http.post(
        "/v1/keys", json={"scopes": ["admin"], "expires_in_seconds": 3600}, headers=auth(admin)
    ).json()
    assert made["expires_at"] is not None
    clock.advance(3599)
    assert _works(http, made["key"])
    clock.advance(2)
    expired = is_problem(http.get("/v1/keys", headers=auth(made["key"])), 401, "KEY_EXPIRED")
    assert made["key"] not in expired["detail"]
    items = http.get("/v1/keys", headers=auth(admin)).json()["items"]
    assert {k["key_id"]: k["state"] for k in items}[made["key_id"]] == "expired"
    at = (clock.now() + timedelta(days=1)).isoformat()
    dated = http.post("/v1/keys", json={"scopes": ["read"], "expires_at": at}, headers=auth(admin))
    assert dated.status_code == 201 and dated.json()["state"] == "live"


@pytest.mark.parametrize(
    "body",
    [
        {"scopes": ["read"], "expires_at": "2001-01-01T00:00:00Z"},  # in the past
        {"scopes": ["read"], "expires_at": "9999-12-31T23:59:59-23:59"},  # past year 9000
        {"scopes": ["read"], "expires_at": "2030-01-01T00:00:00"},  # no timezone
        {"scopes": ["read"], "expires_at": "2030-01-01T00:00:00Z", "expires_in_seconds": 600},
        {"scopes": ["read"], "expires_in_seconds": 10**12},
        {"scopes": ["root"]},
        {"scopes": []},
        {"scopes": ["read"], "name": "nul\x00byte"},
    ],
)
def test_a_bad_key_request_is_422_and_creates_nothing(
    http: TestClient, tidings: Tidings, body: dict[str, object]
) -> None:
    admin = new_key(tidings, "acme", ["admin"])
    answer = http.post("/v1/keys", json=body, headers=auth(admin))
    assert answer.status_code == 422, answer.text
    assert answer.json()["code"] in ("INVALID_INPUT", "DATE_OUT_OF_RANGE")
    assert len(http.get("/v1/keys", headers=auth(admin)).json()["items"]) == 1


def test_a_tenants_usable_keys_are_bounded(
    http: TestClient, tidings: Tidings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api_keys, "MAX_USABLE_KEYS_PER_TENANT", 3)
    admin = new_key(tidings, "acme", ["admin"])
    made = [
        http.post("/v1/keys", json={"scopes": ["read"]}, headers=auth(admin)).json()
        for _ in range(2)
    ]
    full = http.post("/v1/keys", json={"scopes": ["read"]}, headers=auth(admin))
    is_problem(full, 409, "TOO_MANY_KEYS")
    assert new_key(tidings, "globex", ["admin"])  # another tenant is not affected
    http.post(f"/v1/keys/{made[0]['key_id']}/revoke", headers=auth(admin))
    assert http.post("/v1/keys", json={"scopes": ["read"]}, headers=auth(admin)).status_code == 201


def test_a_hostile_key_id_is_422_not_500(http: TestClient, tidings: Tidings) -> None:
    admin = new_key(tidings, "acme", ["admin"])
    for key_id in ("%00", "x" * 100, "ZZ"):
        answer = http.post(f"/v1/keys/{key_id}/revoke", headers=auth(admin))
        is_problem(answer, 422, "INVALID_INPUT")


# --- the CLI ------------------------------------------------------------------


@pytest.fixture
def cli(db_url: str, tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("TIDINGS_HOME", str(tmp_path))
    monkeypatch.setenv("TIDINGS_SECRET_KEY", TEST_SECRET)
    return CliRunner()


def _run(cli: CliRunner, *args: str, code: int = 0) -> str:
    result = cli.invoke(cli_app, list(args))
    assert result.exit_code == code, result.output
    return result.output


def test_the_cli_lists_and_revokes_keys(cli: CliRunner, http: TestClient) -> None:
    out = _run(
        cli, "keys", "create", "--tenant", "acme", "--scopes", "admin", "--expires-in", "90d"
    )
    plaintext = out.split()[-1]  # the key is still the last word
    key_id = plaintext.split("_")[1]
    assert "expiring" in out and _works(http, plaintext)
    other = _run(cli, "keys", "create", "--tenant", "globex", "--scopes", "read").split()[-1]

    listed = _run(cli, "keys", "list", "--tenant", "acme")
    assert key_id in listed and "live" in listed and other.split("_")[1] not in listed
    everyone = _run(cli, "keys", "list")
    assert key_id in everyone and other.split("_")[1] in everyone
    assert "tdg_" not in everyone and plaintext.split("_", 2)[2] not in everyone

    assert f"revoked key {key_id} of tenant acme" in _run(cli, "keys", "revoke", key_id)
    is_problem(http.get("/v1/keys", headers=auth(plaintext)), 401, "KEY_REVOKED")
    assert re.search(rf"{key_id}.*revoked", _run(cli, "keys", "list", "--tenant", "acme"))
    _run(cli, "keys", "revoke", key_id, code=1)  # no live key by that id any more
    _run(cli, "keys", "revoke", other.split("_")[1], "--tenant", "acme", code=1)  # not acme's
    assert _works_read(http, other)


def _works_read(http: TestClient, key: str) -> bool:
    return http.get("/v1/events", headers=auth(key)).status_code == 200


def test_the_cli_refuses_a_bad_expiry(cli: CliRunner) -> None:
    assert "expiring" in _run(cli, "keys", "create", "--tenant", "acme", "--expires-in", "1h")
    _run(cli, "keys", "create", "--tenant", "acme", "--expires-in", "soon", code=2)
    past = "2001-01-01T00:00:00Z"
    _run(cli, "keys", "create", "--tenant", "acme", "--expires-at", past, code=2)
    _run(cli, "keys", "create", "--tenant", "acme", "--expires-at", "2030-01-01", code=2)
