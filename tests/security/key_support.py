"""Small helpers for the key and console tests. Kept apart from
tests/integration/api_support on purpose: that module imports the whole
dispatch stack, which these HTTP-only tests do not need."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi.testclient import TestClient

from tidings import Tidings
from tidings.api.app import create_app
from tidings.api.settings import ApiSettings
from tidings.store.api_keys import create_key


def client(t: Tidings, settings: ApiSettings | None = None, **options: Any) -> TestClient:
    app = create_app(t, settings=settings)
    return TestClient(app, raise_server_exceptions=False, **options)


def new_key(t: Tidings, tenant: str, scopes: Iterable[str]) -> str:
    with t.db.transaction() as conn:
        _, plaintext = create_key(conn, tenant, scopes, f"test key for {tenant}", vault=t.vault)
    return plaintext


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def is_problem(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["status"] == status and body["code"] == code, body
    return body
