"""The API and workers through PgBouncer in transaction pooling mode.

The way most production PostgreSQL is reached (docs/scaling.md). Four
server connections serve an API process and two workers, so every
transaction may land on a server connection another client used last: a
prepared statement, a session-level lock or setting, or a LISTEN that
assumed its own connection fails or goes astray. One worker listens on a
direct connection (`TIDINGS_LISTEN_URL`), the other has none and finds new
intents by the timed scan.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from harness.pgbouncer import bouncer, pgbouncer, through
from harness.processes import ledger, simulator, start_api, start_worker, wait_http, wait_until
from psycopg.conninfo import conninfo_to_dict

from tests.conftest import TEST_SECRET, with_example_policy
from tidings import ManualClock, Tidings
from tidings.cli.devstack import free_port
from tidings.store.api_keys import create_key
from tidings.store.migrate import available, migrate

SENT = {"accepted", "timeout_after_accept"}
POOLED = {"TIDINGS_TRANSACTION_POOLING": "1"}
FINAL = {"accepted", "delivered", "canceled"}


def test_without_the_setting_prepared_statements_break(db_url: str) -> None:
    """The trap, shown: two clients on one server connection (a pool of
    one) each prepare their first statement under psycopg's first name."""
    # Which client's statement collides depends on which reaches the server
    # connection second, opening included: only that one of them does is sure.
    with (
        pgbouncer(db_url, pool_size=1) as port,
        pytest.raises(psycopg.errors.DuplicatePreparedStatement),
        Tidings(through(db_url, port), secret_key=TEST_SECRET, clock=ManualClock()) as first,
        Tidings(through(db_url, port), secret_key=TEST_SECRET, clock=ManualClock()) as second,
    ):
        first.publish_template("offer", channel="sms", body="A spot opened.")
        second.publish_template("offer", channel="sms", body="A spot opened.")


def test_a_repointed_pgbouncer_reaches_its_new_server_within_seconds(db_url: str) -> None:
    """What follows a failover (harness/failover/follow.py): PgBouncer aimed at
    a server that is gone refuses clients; moved to the live one, it serves
    them again at once, not after its 15 s default `server_login_retry`."""
    server = conninfo_to_dict(db_url)
    live = (str(server.get("host") or "127.0.0.1"), int(server.get("port") or 5432))
    gone = ("127.0.0.1", free_port())
    with bouncer(db_url, target=gone, databases=(str(server["dbname"]),)) as pooler:
        pooled = through(db_url, pooler.port)
        assert not _answers(pooled)
        pooler.repoint(*live)
        started = time.monotonic()
        wait_until(lambda: _answers(pooled), timeout=10, what="PgBouncer on its new server")
        assert time.monotonic() - started < 5
        assert pooler.repoints == 1


def _answers(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)
    except psycopg.OperationalError:
        return False


def test_migrations_run_through_the_pooler(fresh_db: str) -> None:
    with pgbouncer(fresh_db) as port:
        pooled = through(fresh_db, port)
        assert [m.version for m in migrate(pooled)] == [m.version for m in available()]
        assert migrate(pooled) == []


def test_api_and_workers_through_pgbouncer_lose_nothing_and_send_nothing_twice(
    db_url: str, tmp_path: Path
) -> None:
    with with_example_policy(Tidings(db_url, secret_key=TEST_SECRET)) as t:
        setup(t)
        with t.db.transaction() as conn:
            _, key = create_key(
                conn, t.tenant, ("send", "read", "admin"), "pgbouncer test", vault=t.vault
            )
    headers = {"Authorization": f"Bearer {key}"}
    with pgbouncer(db_url) as port, simulator(seed=8, latency_ms=20) as sim:
        pooled = through(db_url, port)
        api_port = free_port()
        api = start_api(pooled, tmp_path, api_port, extra_env=POOLED)
        workers = [
            start_worker(pooled, tmp_path, sim, extra_env={**POOLED, "TIDINGS_LISTEN_URL": db_url}),
            start_worker(pooled, tmp_path, sim, extra_env=POOLED),
        ]
        base = f"http://127.0.0.1:{api_port}"
        try:
            wait_http(f"{base}/healthz", api)
            with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
                created = drive(http)
            wait_until(
                lambda: set(states(db_url)) <= FINAL and sum(states(db_url).values()) >= created,
                timeout=120,
                what="every intent final",
            )
        finally:
            for p in [api, *workers]:
                p.send_signal(signal.SIGTERM)
            codes = [p.wait(timeout=60) for p in [api, *workers]]
            # `tidings serve` ends by the signal itself (as it does directly).
            assert codes[0] in (0, -signal.SIGTERM) and codes[1:] == [0, 0], codes
        entries = ledger(sim)
    final = states(db_url)
    per_intent = Counter(
        e["idempotency_key"].split(":")[1] for e in entries if e["outcome"] in SENT
    )
    assert set(per_intent.values()) == {1}, per_intent
    assert sum(final.values()) == created
    # Every intent that reached a provider went once; a cancel may still
    # win after its call (it stays canceled, R000.6), so those may too.
    with psycopg.connect(db_url) as conn:
        reached = {
            str(r[0])
            for r in conn.execute(
                "SELECT id FROM intents WHERE state IN ('accepted', 'delivered')"
            ).fetchall()
        }
    assert reached <= set(per_intent)
    assert len(per_intent) - len(reached) <= final["canceled"]


def drive(http: httpx.Client) -> int:
    """Single intents (some replayed, some canceled), a kill switch flipped,
    a bulk job: what the API does through the pooler. How many intents."""
    ids = []
    for n in range(150):
        answer = http.post("/v1/intents", json=body(n))
        assert answer.status_code == 201, answer.text
        ids.append(answer.json()["id"])
    for n in range(10):  # a replay answers the first intent
        answer = http.post("/v1/intents", json=body(n))
        assert answer.status_code == 200 and answer.json()["id"] == ids[n]
    for intent in ids[-5:]:
        answer = http.post(f"/v1/intents/{intent}/cancel", json={"reason": "member_left"})
        assert answer.status_code in (200, 409), answer.text
    for enabled in (True, False):
        answer = http.put("/v1/controls/kill-switch", json={"enabled": enabled, "scope": {}})
        assert answer.status_code == 200, answer.text
    job = http.post(
        "/v1/jobs",
        json={
            "idempotency_key": "pooled-job",
            "event_class": "notice",
            "purpose": "transactional",
            "template": {"name": "offer"},
            "channels": ["sms"],
            "audience": [{"ref": f"j{n}", "phone": "+14155550123"} for n in range(500)],
        },
    )
    assert job.status_code == 202, job.text
    for _ in range(3):  # reads through the pooler
        assert http.get(f"/v1/intents/{ids[0]}/timeline").status_code == 200
        assert http.get(f"/v1/jobs/{job.json()['id']}").status_code == 200
    return len(ids) + 500


def body(n: int) -> dict[str, Any]:
    return {
        "idempotency_key": f"pooled:{n}",
        "channel": "sms",
        "recipient": {"ref": f"m{n}", "phone": "+14155550123"},
        "template": {"name": "offer"},
        "purpose": "transactional",
        "event_class": "waitlist_offer",
    }


def setup(t: Tidings) -> None:
    t.publish_template("offer", channel="sms", body="A spot opened.")
    policy = resources.files("tidings.policies").joinpath("default.json").read_text()
    t.publish_policy(json.loads(policy))


def states(db_url: str) -> Counter[str]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT state, count(*) FROM intents GROUP BY state").fetchall()
    return Counter({r[0]: r[1] for r in rows})
