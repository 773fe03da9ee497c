"""A tenant's API request rate is bounded across every API process (issue
#20, item 7; invariant 11).

The attack: one tenant floods the API (any route its key reaches) and
takes the database from everyone else. Before the fix there was no limit
at all. Here two API apps, each with its own engine and connection pool as
two `tidings serve` processes would have, share one database and one
injected clock: together they admit tenant A exactly its burst, then
answer 429 RATE_LIMITED with `Retry-After`, refill at the configured rate,
and never refuse tenant B.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import cycle

import pytest
from fastapi.testclient import TestClient

from tests.integration.api_support import auth, is_problem, new_key
from tidings import ManualClock, Tidings
from tidings.api.app import create_app
from tidings.api.settings import ApiSettings

TEST_SECRET = "test-secret-key-0123456789abcdef"


def apps(db_url: str, clock: ManualClock, rate: float, burst: int) -> Iterator[list[TestClient]]:
    settings = ApiSettings(api_rate_per_second=rate, api_rate_burst=burst)
    engines = [Tidings(db_url, clock=clock, secret_key=TEST_SECRET) for _ in range(2)]
    try:
        yield [
            TestClient(create_app(t, settings=settings), raise_server_exceptions=False)
            for t in engines
        ]
    finally:
        for t in engines:
            t.close()


@pytest.fixture
def two_apps(db_url: str, clock: ManualClock) -> Iterator[list[TestClient]]:
    yield from apps(db_url, clock, rate=5, burst=10)


def statuses(clients: list[TestClient], key: str, n: int) -> list[int]:
    """`n` reads by the holder of `key`, spread over the apps in turn."""
    turns = cycle(clients)
    return [next(turns).get("/v1/events", headers=auth(key)).status_code for _ in range(n)]


def test_a_flooding_tenant_is_held_to_its_rate_across_processes(
    tidings: Tidings, clock: ManualClock, two_apps: list[TestClient]
) -> None:
    key_a, key_b = new_key(tidings, "tenant-a"), new_key(tidings, "tenant-b")

    assert statuses(two_apps, key_a, 16) == [200] * 10 + [429] * 6  # the burst, both apps
    for http in two_apps:
        refused = http.get("/v1/events", headers=auth(key_a))
        body = is_problem(refused, 429, "RATE_LIMITED")
        assert int(refused.headers["Retry-After"]) >= 1
        assert "retry in" in body["detail"]
        # Another tenant, on the same processes, at the same moment: untouched.
        assert http.get("/v1/events", headers=auth(key_b)).status_code == 200

    clock.advance(seconds=1)  # refills 5 tokens, shared by both apps
    assert statuses(two_apps, key_a, 8) == [200] * 5 + [429] * 3


def test_tokens_are_taken_in_batches_without_exceeding_the_shared_limit(
    tidings: Tidings, db_url: str, clock: ManualClock
) -> None:
    # At 200/s each app takes 10 tokens per statement; what one app holds
    # unspent is never spent by the other, so the pair admits at most the
    # burst, and at least the burst less what one batch can strand per app.
    key = new_key(tidings, "tenant-a")
    for clients in apps(db_url, clock, rate=200, burst=100):
        admitted = statuses(clients, key, 130).count(200)
        assert 100 - 2 * 9 <= admitted <= 100
        clock.advance(seconds=2)  # unspent batches lapse, the bucket is full again
        admitted = statuses(clients, key, 130).count(200)
        assert 100 - 2 * 9 <= admitted <= 100


def test_the_limit_can_be_turned_off(tidings: Tidings, db_url: str, clock: ManualClock) -> None:
    key = new_key(tidings, "tenant-a")
    for clients in apps(db_url, clock, rate=0, burst=1):
        assert set(statuses(clients, key, 20)) == {200}
