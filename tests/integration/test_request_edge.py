"""Abuse bounds at the request edge (issue #41): an SMS-pumping burst of
password resets to premium-rate ranges is refused at create with
429 REQUEST_LIMIT and nothing stored or sent, while ordinary resets go on."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

import psycopg
import pytest
from fastapi.testclient import TestClient

from tidings import ManualClock, RequestLimited, Tidings
from tidings.dispatch.retention import purge
from tidings.observability.process_metrics import PROCESS_REGISTRY

from .api_support import auth, client, count, is_problem, new_key
from .dispatch_helpers import simulator, worker
from .edge_support import (
    PER_DESTINATION,
    PER_PREFIX,
    ordinary,
    premium,
    reset_body,
    set_up_resets,
)


def _api(t: Tidings, tenant: str) -> TestClient:
    key = new_key(t, tenant)
    set_up_resets(t.for_tenant(tenant))
    http = client(t)
    http.headers.update(auth(key))
    return http


def _counters(db_url: str, scope: str) -> list[tuple[str, str, int]]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT tenant_id, key, used FROM rate_counters WHERE scope = %s ORDER BY key",
            (scope,),
        ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def test_a_pumping_burst_is_stopped_at_the_edge_while_ordinary_resets_go_on(
    tidings: Tidings, db_url: str, clock: ManualClock
) -> None:
    http = _api(tidings, "game")
    refusals = (
        "tidings_request_refusals_total",
        {"event_class": "password_reset", "bound": "prefix"},
    )
    refused_before = PROCESS_REGISTRY.get_sample_value(*refusals) or 0.0
    answers: Counter[tuple[str, int]] = Counter()
    for n in range(60):
        # The script cycles numbers in two premium ranges; players keep
        # asking for their own resets in between.
        for country in ("GB", "LV"):
            body = reset_body(tidings, premium(n, country), f"pump-{country}-{n}")
            got = http.post("/v1/intents", json=body)
            answers[(country, got.status_code)] += 1
            if got.status_code == 429:
                problem = is_problem(got, 429, "REQUEST_LIMIT")
                assert problem["scope"] == "prefix"
                assert 1 <= int(got.headers["Retry-After"]) <= 3600
                assert "+44909" not in problem["detail"] and "+371" not in problem["detail"]
        if n % 2 == 0:
            got = http.post("/v1/intents", json=reset_body(tidings, ordinary(n), f"player-{n}"))
            assert got.status_code == 201, got.text
            answers[("player", 201)] += 1
    assert answers == {
        ("GB", 201): PER_PREFIX,
        ("GB", 429): 60 - PER_PREFIX,
        ("LV", 201): PER_PREFIX,
        ("LV", 429): 60 - PER_PREFIX,
        ("player", 201): 30,
    }
    # The API process counts each refusal where it was stopped.
    assert PROCESS_REGISTRY.get_sample_value(*refusals) == refused_before + 2 * (60 - PER_PREFIX)
    # Nothing of a refused request was stored, so nothing of it can be sent.
    assert count(db_url, "intents") == 2 * PER_PREFIX + 30
    sim = simulator(clock)
    run = worker(tidings.for_tenant("game"), sim)
    while run.dispatch_once():
        pass
    assert len(sim.ledger()) == 2 * PER_PREFIX + 30
    # Counters name hashes and prefixes, never a number.
    for _, key, _ in _counters(db_url, "request_destination"):
        assert "+" not in key
    prefixes = {k.rsplit(":", 1)[1]: used for _, k, used in _counters(db_url, "request_prefix")}
    assert prefixes["+44909"] == prefixes["+371900"] == PER_PREFIX
    # Every request counts in its country's volume, refused ones too.
    volume = {k: used for _, k, used in _counters(db_url, "request_volume")}
    assert volume["password_reset|GB|+44909"] == 60
    assert volume["password_reset|LV|+371900"] == 60


def test_one_number_is_bounded_and_a_replayed_key_is_never_refused(
    tidings: Tidings, db_url: str
) -> None:
    http = _api(tidings, "game")
    phone = ordinary(7)
    first = reset_body(tidings, phone, "reset-0")
    assert http.post("/v1/intents", json=first).status_code == 201
    for n in range(1, PER_DESTINATION):
        assert http.post("/v1/intents", json=reset_body(tidings, phone, f"reset-{n}")).is_success
    over = http.post("/v1/intents", json=reset_body(tidings, phone, "reset-over"))
    assert is_problem(over, 429, "REQUEST_LIMIT")["scope"] == "destination"
    assert http.post("/v1/intents", json=first).status_code == 200  # the first, replayed
    other = http.post("/v1/intents", json=reset_body(tidings, ordinary(8), "reset-other"))
    assert other.status_code == 201
    assert count(db_url, "intents") == PER_DESTINATION + 1


def test_a_class_the_policy_does_not_mark_is_not_bounded(tidings: Tidings) -> None:
    http = _api(tidings, "game")
    for n in range(PER_DESTINATION + 2):
        body = reset_body(tidings, premium(0), f"notice-{n}", event_class="login_notice")
        assert http.post("/v1/intents", json=body).status_code == 201


def test_the_window_ending_lets_the_prefix_take_requests_again(
    tidings: Tidings, clock: ManualClock
) -> None:
    http = _api(tidings, "game")
    for n in range(PER_PREFIX):
        assert http.post("/v1/intents", json=reset_body(tidings, premium(n), f"a-{n}")).is_success
    refused = http.post("/v1/intents", json=reset_body(tidings, premium(99), "a-over"))
    wait = int(is_problem(refused, 429, "REQUEST_LIMIT") and refused.headers["Retry-After"])
    clock.advance(wait)
    again = http.post("/v1/intents", json=reset_body(tidings, premium(99), "a-later"))
    assert again.status_code == 201, again.text


def test_one_tenants_burst_never_bounds_another(tidings: Tidings) -> None:
    pumped, other = _api(tidings, "pumped"), _api(tidings, "other")
    for n in range(PER_PREFIX + 5):
        pumped.post("/v1/intents", json=reset_body(tidings, premium(n), f"p-{n}"))
    refused = pumped.post("/v1/intents", json=reset_body(tidings, premium(500), "p-more"))
    is_problem(refused, 429, "REQUEST_LIMIT")
    for n in range(PER_PREFIX):
        got = other.post("/v1/intents", json=reset_body(tidings, premium(n), f"o-{n}"))
        assert got.status_code == 201, got.text


def test_racing_bursts_cannot_pass_the_bound_together(tidings: Tidings, db_url: str) -> None:
    t = tidings.for_tenant("game")
    set_up_resets(t)
    created: list[str] = []
    refused: list[str] = []
    start = threading.Barrier(4)

    def burst(script: int) -> None:
        name = f"script{script}"
        start.wait()
        for n in range(10):
            body = reset_body(t, premium(100 * script + n), f"{name}-{n}")
            try:
                t.notify(**body)
                created.append(name)
            except RequestLimited as exc:
                assert exc.scope == "prefix"
                refused.append(name)

    threads = [threading.Thread(target=burst, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(created) == PER_PREFIX and len(refused) == 40 - PER_PREFIX
    assert count(db_url, "intents") == PER_PREFIX


def test_a_refusal_inside_the_callers_transaction_leaves_it_usable(
    tidings: Tidings, db_url: str
) -> None:
    t = tidings.for_tenant("game")
    set_up_resets(t)
    phone = ordinary(3)
    with t.db.transaction() as conn:
        for n in range(PER_DESTINATION):
            t.notify(**reset_body(t, phone, f"tx-{n}"), conn=conn)
        with pytest.raises(RequestLimited) as refused:
            t.notify(**reset_body(t, phone, "tx-over"), conn=conn)
        assert refused.value.code == "REQUEST_LIMIT" and refused.value.retry_after >= 1
        t.notify(**reset_body(t, ordinary(4), "tx-other"), conn=conn)
    assert count(db_url, "intents") == PER_DESTINATION + 1


def test_an_email_reset_is_bounded_per_address_and_the_refusal_is_logged(
    tidings: Tidings, db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    t = tidings.for_tenant("game")
    set_up_resets(t)
    t.publish_template(
        "password_reset", channel="email", subject="Reset", body="Code {{ code }}",
        required_variables=["code"],
    )  # fmt: skip
    recipient = {"ref": "player-9", "email": "Player.Nine@example.org", "timezone": "UTC"}
    for n in range(PER_DESTINATION):
        t.notify(**reset_body(t, "", f"mail-{n}", channel="email", recipient=recipient))
    over = reset_body(t, "", "mail-over", channel="email", recipient=recipient)
    with caplog.at_level("WARNING", "tidings.intake.create"), pytest.raises(RequestLimited) as no:
        t.notify(**over)
    assert no.value.scope == "destination"
    [record] = [r for r in caplog.records if r.getMessage() == "request refused at the edge"]
    assert record.__dict__["bound"] == "destination" and record.__dict__["tenant_id"] == "game"
    assert count(db_url, "intents") == PER_DESTINATION
    assert _counters(db_url, "request_volume") == []  # an e-mail has no prefix to watch


def test_a_bursts_counters_are_forgotten_once_their_windows_are_long_past(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    # A script walking many numbers leaves a counter per number and window;
    # retention forgets each one two days after its window ended, not before.
    http = _api(tidings, "game")
    for n in range(12):
        assert http.post("/v1/intents", json=reset_body(tidings, premium(n), f"p-{n}")).is_success
    with psycopg.connect(db_url) as conn:
        written = conn.execute("SELECT count(*), max(window_end) FROM rate_counters").fetchone()
    assert written is not None and written[0] >= 12
    assert purge(tidings.db, clock.now())["rate_counters"] == 0
    clock.set(written[1] + timedelta(days=2) - timedelta(seconds=1))
    kept = purge(tidings.db, clock.now())["rate_counters"]
    with psycopg.connect(db_url) as conn:
        (left,) = conn.execute(
            "SELECT count(*) FROM rate_counters WHERE window_end = %s", (written[1],)
        ).fetchone() or (0,)
    assert left > 0  # the longest window's rows: a day and more after it ended, still read
    clock.advance(2)
    assert purge(tidings.db, clock.now())["rate_counters"] + kept == written[0]
    assert count(db_url, "rate_counters") == 0
