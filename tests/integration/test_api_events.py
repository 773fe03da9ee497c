"""The event feed: cursor paging that never skips an event committed late."""

from __future__ import annotations

import time
from typing import Any
from uuid import UUID

import psycopg
import pytest
from fastapi.testclient import TestClient

from tidings import Tidings
from tidings.client import cancel_intent

from .api_support import TENANT, auth, intent_body, is_problem, new_key, publish_offer


def create(api: TestClient, tidings: Tidings, n: int) -> str:
    return str(api.post("/v1/intents", json=intent_body(tidings, n)).json()["id"])


def read(api: TestClient, after: str | None = None, limit: int = 100) -> dict[str, Any]:
    params: dict[str, Any] = {"limit": limit} | ({"after": after} if after else {})
    answer = api.get("/v1/events", params=params)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def read_until(api: TestClient, after: str | None, n: int, timeout: float = 60.0) -> dict[str, Any]:
    # The database is shared: another session's running transaction may hold
    # the visibility horizon back for a moment, never forever.
    deadline = time.monotonic() + timeout
    page = read(api, after)
    while len(page["items"]) < n and time.monotonic() < deadline:
        time.sleep(0.05)
        page = read(api, after)
    return page


def test_pages_follow_the_cursor_to_the_end(api: TestClient, tidings: Tidings) -> None:
    ids = [create(api, tidings, n) for n in range(3)]
    for intent_id in ids:
        api.post(f"/v1/intents/{intent_id}/cancel", json={"reason": "class_canceled"})
    read_until(api, None, 3)
    first = read(api, limit=2)
    assert first["has_more"] is True
    second = read(api, first["next"], limit=2)
    assert second["has_more"] is False
    items = first["items"] + second["items"]
    assert [e["intent_id"] for e in items] == ids
    assert {e["type"] for e in items} == {"intent.canceled"}
    assert items[0]["payload"]["state"] == "canceled" and items[0]["created_at"]
    caught_up = read(api, second["next"])
    assert caught_up["items"] == [] and caught_up["next"] == second["next"]


def test_an_event_committed_after_a_later_one_is_not_skipped(
    api: TestClient, tidings: Tidings, db_url: str
) -> None:
    early, late = create(api, tidings, 1), create(api, tidings, 2)
    start = read(api)["next"]
    with psycopg.connect(db_url) as first, psycopg.connect(db_url) as second:
        # `first` writes its event before `second`, but commits after it.
        _cancel(first, early, tidings)
        _cancel(second, late, tidings)
        second.commit()
        hidden = read(api, start)
        assert hidden["items"] == [] and hidden["next"] == start
        first.commit()
    page = read_until(api, start, 2)
    assert [e["intent_id"] for e in page["items"]] == [early, late]


def _cancel(conn: psycopg.Connection[Any], intent_id: str, tidings: Tidings) -> None:
    cancel_intent(conn, TENANT, UUID(intent_id), "operator", tidings.clock.now(), "test")


def test_a_tenant_sees_only_its_own_events(api: TestClient, tidings: Tidings) -> None:
    mine = create(api, tidings, 1)
    api.post(f"/v1/intents/{mine}/cancel", json={"reason": "operator"})
    publish_offer(tidings, "globex")
    other = auth(new_key(tidings, "globex"))
    theirs = api.post("/v1/intents", json=intent_body(tidings, 9), headers=other).json()["id"]
    api.post(f"/v1/intents/{theirs}/cancel", json={"reason": "operator"}, headers=other)
    assert [e["intent_id"] for e in read_until(api, None, 1)["items"]] == [mine]


@pytest.mark.parametrize(
    "query", ["after=garbage", "after=ZTE6eDox", "after=ZTI6MTox", "limit=0", "limit=100000"]
)
def test_a_bad_cursor_or_limit_is_422(api: TestClient, query: str) -> None:
    is_problem(api.get(f"/v1/events?{query}"), 422, "INVALID_INPUT")
