"""Issue #39, finding 8: a key minted by another key cannot outlive it.

The attack: a short-lived admin key (one hour, handed to a contractor)
mints a never-expiring admin key; the short key expires or is revoked,
and the minted one keeps working for ever. Now a minted key records its
parent; with no expiry asked for it expires with its parent, an expiry
past the parent's is refused, and revoking a key revokes every key it
minted, and theirs, saying which in the answer.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.security.key_support import auth, client, is_problem, new_key
from tidings import ManualClock, Tidings


@pytest.fixture
def http(tidings: Tidings) -> TestClient:
    return client(tidings)


def mint(http: TestClient, parent: str, **body: Any) -> dict[str, Any]:
    made = http.post("/v1/keys", json={"scopes": ["admin"], **body}, headers=auth(parent))
    assert made.status_code == 201, made.text
    answer: dict[str, Any] = made.json()
    return answer


def test_a_minted_key_expires_no_later_than_its_parent(
    http: TestClient, tidings: Tidings, clock: ManualClock
) -> None:
    root = new_key(tidings, "acme", ["admin"])  # an operator's key: no parent, no expiry
    short = mint(http, root, expires_in_seconds=3600)
    assert short["parent_key_id"] == root.split("_")[1]
    child = mint(http, short["key"])  # asks for no expiry: gets its parent's
    assert child["parent_key_id"] == short["key_id"]
    assert child["expires_at"] == short["expires_at"]
    grandchild = mint(http, child["key"], expires_in_seconds=600)  # sooner: kept as asked
    assert datetime.fromisoformat(grandchild["expires_at"]) == clock.now() + timedelta(seconds=600)

    later = (clock.now() + timedelta(days=365)).isoformat()
    for body in ({"expires_at": later}, {"expires_in_seconds": 7200}):
        beyond = http.post(
            "/v1/keys", json={"scopes": ["admin"], **body}, headers=auth(short["key"])
        )
        assert "parent" in is_problem(beyond, 422, "INVALID_INPUT")["detail"]

    clock.advance(seconds=3601)
    for key in (short["key"], child["key"]):
        is_problem(http.get("/v1/keys", headers=auth(key)), 401, "KEY_EXPIRED")
    assert http.get("/v1/keys", headers=auth(root)).status_code == 200  # the root lives on


def test_revoking_a_key_revokes_every_key_it_minted(http: TestClient, tidings: Tidings) -> None:
    root = new_key(tidings, "acme", ["admin"])
    parent = mint(http, root, name="contractor")
    child = mint(http, parent["key"], name="minted")
    grandchild = mint(http, child["key"], scopes=["read"], name="minted by minted")
    sibling = mint(http, root, name="unrelated")

    revoked = http.post(f"/v1/keys/{parent['key_id']}/revoke", headers=auth(root))
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["state"] == "revoked"
    assert sorted(revoked.json()["revoked_descendants"]) == sorted(
        [child["key_id"], grandchild["key_id"]]
    )
    for key in (parent["key"], child["key"], grandchild["key"]):
        is_problem(http.get("/v1/events", headers=auth(key)), 401, "KEY_REVOKED")
    for key in (root, sibling["key"]):
        assert http.get("/v1/keys", headers=auth(key)).status_code == 200
    states = {
        k["key_id"]: k["state"] for k in http.get("/v1/keys", headers=auth(root)).json()["items"]
    }
    assert states[grandchild["key_id"]] == "revoked" and states[sibling["key_id"]] == "live"
    again = http.post(f"/v1/keys/{parent['key_id']}/revoke", headers=auth(root))
    assert again.status_code == 200 and again.json()["revoked_at"] == revoked.json()["revoked_at"]
