"""Poison rows (issue #20, item 1; DESIGN.md invariant 11).

A hostile tenant once stored a time Python cannot hold (year 10000 in
UTC); the shared claim query then failed on that row every round and every
tenant's intents stayed `pending`. The API and the database now refuse
such values (test_date_bounds.py), so here they are planted directly in
the database, around the checks, as a buggy writer or an old release
might: each unreadable intent is quarantined alone (failed/UNDECODABLE,
counted, alerted) and the other tenant's intents are still sent.
"""

from __future__ import annotations

import signal
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import psycopg
from harness.hostile_cases import NESTED_VARIABLES, YEAR_0, YEAR_10000
from harness.hostile_cases import plant as plant_around_checks
from harness.processes import ledger, start_api, start_worker, wait_http, wait_until
from harness.processes import simulator as simulator_process

from tests.conftest import TEST_SECRET, publish_example_policy
from tests.integration.api_support import auth, intent_body, new_key, publish_offer
from tests.integration.dispatch_helpers import offer, publish_offer_template, sends, simulator
from tests.integration.dispatch_helpers import worker as make_worker
from tests.integration.observability_helpers import evaluate_alerts, render_metrics
from tidings import ManualClock, Tidings
from tidings.cli.devstack import free_port
from tidings.store.queries import q

HOSTILE, VICTIM = "hostile", "victim"
SENT = {"accepted", "timeout_after_accept"}


def plant(db_url: str, sql: str, *params: Any) -> None:
    with psycopg.connect(db_url) as conn:
        plant_around_checks(conn, sql, params)


def plant_poison(t: Tidings, db_url: str) -> list[UUID]:
    """Four unreadable intents of the hostile tenant, each a different way."""
    hostile = t.for_tenant(HOSTILE)
    publish_example_policy(hostile)
    publish_example_policy(t, VICTIM)
    publish_offer_template(hostile)
    ids = [offer(hostile, n).id for n in range(1, 5)]
    plant(
        db_url, "UPDATE intents SET expires_at = %s::timestamptz WHERE id = %s", YEAR_10000, ids[0]
    )
    # Past its deadline at any time: the sweep picks it up too.
    plant(db_url, "UPDATE intents SET expires_at = %s::timestamptz WHERE id = %s", YEAR_0, ids[1])
    plant(db_url, f"UPDATE intents SET variables = {NESTED_VARIABLES} WHERE id = %s", ids[2])
    # Consent evidence the claim reads with the intent (dispatch/facts.py).
    hostile.put_contact("member-1804", phone="+14155550123")
    plant(
        db_url,
        "INSERT INTO consents (tenant_id, ref, channel, purpose, source, captured_at, recorded_at)"
        " VALUES (%s, 'member-1804', 'sms', 'transactional', 'form', %s::timestamptz, now())",
        HOSTILE,
        YEAR_10000,
    )
    return ids


def states(db_url: str, ids: Iterable[UUID]) -> dict[UUID, tuple[str, str | None]]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT id, state, decision_code FROM intents WHERE id = ANY(%s)", [list(ids)]
        ).fetchall()
    return {r[0]: (r[1], r[2]) for r in rows}


def test_unreadable_intents_are_quarantined_alone_and_the_batch_is_sent(
    tidings: Tidings, db_url: str, clock: ManualClock
) -> None:
    poison = plant_poison(tidings, db_url)
    victim = tidings.for_tenant(VICTIM)
    publish_offer_template(victim)
    victims = [offer(victim, n).id for n in range(1, 6)]
    core = simulator(clock)
    w = make_worker(tidings, core)

    w.dispatch_once("sms")

    assert {s for s, _ in states(db_url, victims).values()} == {"accepted"}
    assert len(sends(core)) == len(victims)  # the victim's, and only those
    assert set(states(db_url, poison).values()) == {("failed", "UNDECODABLE")}
    with psycopg.connect(db_url) as conn:
        audit = conn.execute(
            "SELECT from_state, event, to_state, input->>'code' FROM transitions"
            " WHERE intent_id = ANY(%s) AND event = 'quarantined'",
            [poison],
        ).fetchall()
    assert sorted(audit) == [("pending", "quarantined", "failed", "UNDECODABLE")] * 4
    # Counted from rows, and raised as an alert for the tenant it belongs to.
    body, _ = render_metrics(tidings.runtime)
    assert b'tidings_quarantined_intents_total{code="UNDECODABLE",tenant="hostile"} 4.0' in body
    alerts = evaluate_alerts(tidings.db, clock.now())
    assert not [a for a in alerts if a.condition == "impossible_transitions"]
    assert [(a.tenant_id, a.key, a.severity) for a in alerts if a.condition == "quarantined"] == [
        (HOSTILE, "quarantined", "warning")
    ]
    # A second round finds nothing left to trip over.
    victim_late = offer(victim, 9).id
    w.dispatch_once("sms")
    assert states(db_url, [victim_late])[victim_late][0] == "accepted"
    # The alert resolves itself once the window has passed.
    clock.advance(days=2)
    assert not [a for a in evaluate_alerts(tidings.db, clock.now()) if a.condition == "quarantined"]


def test_the_sweep_expires_other_tenants_past_an_unreadable_deadline(
    tidings: Tidings, db_url: str, clock: ManualClock
) -> None:
    poison = plant_poison(tidings, db_url)
    victim = tidings.for_tenant(VICTIM)
    publish_offer_template(victim)
    late = offer(victim, 1, expires_at=clock.now() + timedelta(minutes=1)).id
    clock.advance(minutes=2)
    w = make_worker(tidings, simulator(clock))

    w.sweep_once()

    assert states(db_url, [late])[late] == ("expired", "DEADLINE_PASSED")
    assert states(db_url, [poison[1]])[poison[1]] == ("failed", "UNDECODABLE")


def test_poison_rows_under_traffic_do_not_stop_another_tenants_sends(
    db_url: str, tmp_path: Path, spawns: None
) -> None:
    """The real processes: `tidings serve`, `tidings worker` and the
    simulator. The victim's intents, created over HTTP while the hostile
    tenant's unreadable rows sit at the head of the queue, are sent within
    seconds, each once."""
    with Tidings(db_url, secret_key=TEST_SECRET) as t:
        poison = plant_poison(t, db_url)
        publish_offer(t, VICTIM)
        key = auth(new_key(t, VICTIM))
    port = free_port()
    api_url = f"http://127.0.0.1:{port}"
    with simulator_process(seed=3) as sim:
        api = start_api(db_url, tmp_path, port)
        worker = start_worker(db_url, tmp_path, sim)
        try:
            wait_http(f"{api_url}/healthz", api)
            created = []
            with Tidings(db_url, secret_key=TEST_SECRET) as t:
                for n in range(1, 21):
                    body = intent_body(t, n)
                    response = httpx.post(f"{api_url}/v1/intents", json=body, headers=key)
                    assert response.status_code == 201, response.text
                    created.append(UUID(response.json()["id"]))
            wait_until(
                lambda: (
                    {s for s, _ in states(db_url, created).values()} <= {"accepted", "delivered"}
                ),
                timeout=20,
                what="the victim's intents sent",
            )
            wait_until(
                lambda: set(states(db_url, poison).values()) == {("failed", "UNDECODABLE")},
                timeout=20,
                what="the hostile rows quarantined",
            )
        finally:
            for proc in (worker, api):
                proc.send_signal(signal.SIGTERM)
            for proc in (worker, api):
                proc.wait(timeout=30)
        keys = [e["idempotency_key"] for e in ledger(sim) if e["outcome"] in SENT]
    assert len(keys) == len(created) == len(set(keys))  # each once, the hostile rows never


def test_claiming_one_row_reads_what_the_batch_claim_reads() -> None:
    """claim_one stands in for claim_due when a batch is claimed row by
    row: the same columns, so nothing behaves differently in that mode."""

    def select_list(name: str) -> str:
        sql = q(name)
        start = sql.index("SELECT i.*")
        return " ".join(sql[start : sql.index("\nFROM ", start)].split())

    assert select_list("claim_one") == select_list("claim_due")
