"""Issue #39, finding 7: keys that do not authenticate, and the console,
are held to a rate too (invariant 11).

The attacks: a client floods the API with unknown, malformed or revoked
keys, each of which cost a database read, unlimited; or it reads the
console, which never consulted the tenant's rate, with a Bearer key or a
session cookie. Now a failed authentication spends a budget of the client
address (and of the key id named in the key) that is checked before any
database read, and every console request spends its tenant's API tokens.

Database work is counted twice over, without mocks: connections the
engine's pool handed out, and the test database's committed transactions
(`pg_stat_database.xact_commit`, read after the engine's connections have
closed, which is when PostgreSQL has surely flushed their counts).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import psycopg
import pytest
from fastapi.testclient import TestClient

from tests.conftest import TEST_SECRET
from tests.security.key_support import auth, is_problem, new_key
from tidings import ManualClock, Tidings
from tidings.api.app import create_app
from tidings.api.settings import ApiSettings
from tidings.console.auth import COOKIE

BURST = 5
FLOOD = 200


@pytest.fixture
def engine(db_url: str, clock: ManualClock) -> Iterator[Tidings]:
    t = Tidings(db_url, clock=clock, secret_key=TEST_SECRET)
    yield t
    t.close()


def client_at(t: Tidings, address: str, settings: ApiSettings | None = None) -> TestClient:
    config = settings or ApiSettings(auth_failure_rate_per_second=1, auth_failure_burst=BURST)
    app = create_app(t, settings=config)
    return TestClient(app, raise_server_exceptions=False, client=(address, 40000))


def commits(db_url: str) -> int:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def backends(db_url: str) -> int:
    """Connections to the test database, other than the one asking."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def checkouts(t: Tidings) -> int:
    return int(t.db.pool.get_stats().get("requests_num", 0))


def test_a_flood_of_unknown_keys_is_refused_before_the_database(
    engine: Tidings, tidings: Tidings, db_url: str
) -> None:
    good = new_key(tidings, "acme", ["read"])
    hostile = client_at(engine, "203.0.113.7")
    other = TestClient(hostile.app, raise_server_exceptions=False, client=("198.51.100.9", 1))
    engine.db.pool.wait()  # its connections are open: their set-up is not counted below
    before_commits, before_checkouts = commits(db_url), checkouts(engine)
    answers = [
        hostile.get("/v1/events", headers=auth(f"tdg_{i:012x}_{'x' * 43}")).status_code
        for i in range(FLOOD)
    ]
    malformed = [hostile.get("/v1/events", headers=auth("nope")).status_code for _ in range(20)]
    assert answers[:BURST] == [401] * BURST
    assert set(answers[BURST:]) == {429} and set(malformed) == {429}
    refused = hostile.get("/v1/events", headers=auth("tdg_0123456789ab_guess"))
    assert int(is_problem(refused, 429, "RATE_LIMITED") and refused.headers["Retry-After"]) >= 1
    assert checkouts(engine) - before_checkouts == BURST  # one read per admitted failure
    closing = int(engine.db.pool.get_stats().get("pool_size", 0))
    present = backends(db_url)
    engine.close()  # its connections end, so PostgreSQL has counted all they did
    deadline = time.monotonic() + 10
    while backends(db_url) > present - closing and time.monotonic() < deadline:
        time.sleep(0.05)  # a backend counts its last work as it exits
    # Each admitted failure: its read, and perhaps the pool's liveness check
    # of the connection. The measuring connections count themselves too,
    # and the fixture's engine may flush a count meanwhile; 220 requests
    # cost at least 220 before.
    assert commits(db_url) - before_commits <= 2 * BURST + 10

    # Another address, on the same process, is served as ever.
    with Tidings(db_url, secret_key=TEST_SECRET) as reopened:
        other.app.state.tidings = reopened
        served = other.get("/v1/events", headers=auth(good))
    assert served.status_code == 200, served.text


def test_guessing_one_key_ids_secret_from_many_addresses_is_limited_by_key_id(
    engine: Tidings, tidings: Tidings
) -> None:
    key_id = new_key(tidings, "acme", ["read"]).split("_")[1]
    app = client_at(engine, "203.0.113.1").app  # one process, many addresses
    answers = [
        TestClient(app, client=(f"203.0.113.{i}", 40000))
        .get("/v1/events", headers=auth(f"tdg_{key_id}_{'guess' * 8}{i}"))
        .status_code
        for i in range(3 * BURST)
    ]
    assert answers == [401] * BURST + [429] * (2 * BURST)


def test_a_revoked_key_is_limited_and_a_good_key_elsewhere_is_not(
    engine: Tidings, tidings: Tidings, clock: ManualClock
) -> None:
    admin = new_key(tidings, "acme", ["admin"])
    http = client_at(engine, "203.0.113.7")
    made = http.post("/v1/keys", json={"scopes": ["read"]}, headers=auth(admin)).json()
    http.post(f"/v1/keys/{made['key_id']}/revoke", headers=auth(admin))
    answers = [http.get("/v1/events", headers=auth(made["key"])).status_code for _ in range(30)]
    assert answers == [401] * BURST + [429] * (30 - BURST)
    assert client_at(engine, "198.51.100.9").get("/v1/keys", headers=auth(admin)).status_code == 200
    clock.advance(seconds=2)  # the address's budget refills at its rate
    assert http.get("/v1/events", headers=auth(made["key"])).status_code == 401


def test_unknown_console_sessions_and_keys_are_limited_by_address(engine: Tidings) -> None:
    hostile = client_at(engine, "203.0.113.7")
    pages = [
        hostile.get("/console/", cookies={COOKIE: f"forged-{i}"}).status_code for i in range(10)
    ]
    assert pages == [401] * BURST + [429] * (10 - BURST)
    bearer = hostile.get("/console/", headers=auth("tdg_0123456789ab_guess"))
    assert bearer.status_code == 429 and int(bearer.headers["Retry-After"]) >= 1


def test_console_requests_spend_the_tenants_api_rate(engine: Tidings, tidings: Tidings) -> None:
    key, theirs = new_key(tidings, "acme", ["read"]), new_key(tidings, "globex", ["read"])
    # A rate of 1/s takes one token per statement: the counts below are exact.
    limited = ApiSettings(api_rate_per_second=1, api_rate_burst=6)
    http, browser = client_at(engine, "198.51.100.9", limited), client_at(engine, "::1", limited)
    assert [http.get("/console/jobs", headers=auth(key)).status_code for _ in range(4)] == [200] * 4
    token = browser.get("/console/").cookies["tidings_console_csrf"]  # no key: no token spent
    login = browser.post("/console/login", data={"key": key, "csrf": token}, follow_redirects=False)
    assert login.status_code == 303, login.text  # the fifth token
    assert [browser.get("/console/jobs").status_code for _ in range(3)] == [200, 429, 429]
    refused = http.get("/console/jobs", headers=auth(key))
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    is_problem(http.get("/v1/events", headers=auth(key)), 429, "RATE_LIMITED")
    assert http.get("/console/jobs", headers=auth(theirs)).status_code == 200  # globex untouched
