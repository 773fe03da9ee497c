"""Shared set-up for the HTTP API tests: an app over the test database,
API keys per tenant, and a valid intent body."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

import psycopg
from fastapi.testclient import TestClient

from tidings import Tidings
from tidings.api.app import create_app
from tidings.providers.base import ProviderAdapter
from tidings.store.api_keys import create_key

from ..conftest import publish_example_policy
from .dispatch_helpers import OFFER_BODY

ALL_SCOPES = ("send", "read", "admin", "webhook")
# The tenant of the shared `api` fixture (conftest.py).
TENANT = "acme"
PHONE = "+14155550123"
EMAIL = "Member.Person@example.org"


def client(t: Tidings, adapters: Mapping[str, ProviderAdapter] | None = None) -> TestClient:
    # Server errors come back as 500 answers, as a real client would see them.
    return TestClient(create_app(t, adapters=adapters or {}), raise_server_exceptions=False)


def new_key(
    t: Tidings, tenant: str, scopes: Iterable[str] = ALL_SCOPES, *, policy: bool = True
) -> str:
    """A key for `tenant`, whose example policy is published unless `policy`
    is False (a tenant that has published none is denied everything)."""
    if policy:
        publish_example_policy(t, tenant)
    with t.db.transaction() as conn:
        _, plaintext = create_key(conn, tenant, scopes, f"test key for {tenant}", vault=t.vault)
    return plaintext


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def publish_offer(t: Tidings, tenant: str) -> None:
    t.for_tenant(tenant).publish_template(
        "waitlist_offer",
        channel="sms",
        body=OFFER_BODY,
        required_variables=["class_name", "deadline"],
    )


def intent_body(t: Tidings, n: int = 1, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "idempotency_key": f"waitlist:771:{1800 + n}:offer:1",
        "channel": "sms",
        "recipient": {
            "ref": f"member-{1800 + n}",
            "phone": PHONE,
            "timezone": "America/Los_Angeles",
        },
        "template": {"name": "waitlist_offer"},
        "variables": {"class_name": "Spin 7am", "deadline": "18:00"},
        "purpose": "transactional",
        "event_class": "waitlist_offer",
        "expires_at": (t.clock.now() + timedelta(minutes=30)).isoformat(),
        "correlation_id": f"booking-{n}",
    }
    body.update(overrides)
    return body


def count(db_url: str, table: str) -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # test-only, fixed names
    assert row is not None
    return int(row[0])


def receipts_stored(db_url: str) -> int:
    """Receipts kept, matched to an attempt or not (unmatched_observations)."""
    return count(db_url, "observations") + count(db_url, "unmatched_observations")


def is_problem(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["status"] == status and body["code"] == code
    assert {"type", "title", "detail"} <= set(body)
    return body
