"""Invariant 11: a tenant's slow webhook server holds up nobody else.

The attack: a tenant points its event webhook at a tarpit that answers one
byte at a time, each long before any per-read timeout. Pushes used to run
in the worker's maintenance round, so the tarpit held lease heartbeats,
sweeps, alerts, reconciliation and every other tenant's pushes. Now they run
on a pool of their own, each request within one overall deadline.

A running worker (`Worker.run`, its real threads) on the system clock; the
tarpit is on loopback, allowed by the development setting.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import datetime

import psycopg
import pytest

from tests.conftest import TEST_SECRET
from tidings import Tidings
from tidings.dispatch.runner import Worker

from ..integration.dispatch_helpers import offer, simulator, worker
from .webhook_receivers import (
    ALLOW_PRIVATE,
    SECRET,
    canceled_offers,
    ready_tenant,
    receiver,
    tarpit,
)

DEADLINE = 1.0


@pytest.fixture
def live(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tidings]:
    monkeypatch.setenv(ALLOW_PRIVATE, "1")
    t = Tidings(db_url, secret_key=TEST_SECRET)  # the system clock: a live worker
    yield t
    t.close()


def _lease_of(db_url: str, intent_id: object) -> datetime:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT lease_expires_at FROM intents WHERE id = %s", (intent_id,)
        ).fetchone()
    assert row is not None and row[0] is not None
    return row[0]  # type: ignore[no-any-return]


def _running(w: Worker) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    thread = threading.Thread(target=w.run, args=(stop,), daemon=True)
    thread.start()
    return stop, thread


def test_a_tarpit_holds_neither_heartbeats_nor_another_tenants_pushes(
    live: Tidings, db_url: str
) -> None:
    hostile = ready_tenant(live.for_tenant("hostile"))
    victim = ready_tenant(live.for_tenant("victim"))
    w = worker(
        live,
        simulator(live.clock),  # type: ignore[arg-type]
        maintenance_interval=0.05,
        lease_seconds=30,
        event_push_deadline=DEADLINE,
        event_push_concurrency=2,
    )
    # A send of the victim's under way: its lease lives on heartbeats.
    held = offer(victim, 99)
    [claimed] = w.claim("sms", 1)
    w._hold([claimed])
    with tarpit() as (tarpit_port, tarpit_hit), receiver() as (received, port):
        hostile.set_event_webhook(f"http://127.0.0.1:{tarpit_port}/hooks", SECRET)
        victim.set_event_webhook(f"http://127.0.0.1:{port}/hooks", SECRET)
        canceled_offers(hostile, 2)
        stop, thread = _running(w)
        try:
            assert tarpit_hit.wait(5), "the hostile tenant's push never started"
            held_since = time.monotonic()
            lease_before = _lease_of(db_url, held.id)
            canceled_offers(victim, 1)  # while the tarpit holds its push
            assert received.arrived.wait(DEADLINE + 1.5), "the victim's event waited"
            time.sleep(0.6)
            lease_after = _lease_of(db_url, held.id)
            # Heartbeats went on while the tarpit held its push.
            assert (lease_after - lease_before).total_seconds() >= 0.3
            assert time.monotonic() - held_since < DEADLINE + 2
        finally:
            stop.set()
            thread.join(10)
    assert [e["type"] for b in received.bodies for e in b["events"]] == ["intent.canceled"]


def test_a_tarpit_push_ends_at_the_overall_deadline(live: Tidings, db_url: str) -> None:
    hostile = ready_tenant(live.for_tenant("hostile"))
    w = worker(
        live,
        simulator(live.clock),  # type: ignore[arg-type]
        event_push_deadline=DEADLINE,
    )
    with tarpit(every=0.1) as (tarpit_port, hit):
        hostile.set_event_webhook(f"http://127.0.0.1:{tarpit_port}/hooks", SECRET)
        canceled_offers(hostile, 1)
        # Events show once no older transaction runs anywhere on the server.
        give_up = time.monotonic() + 60
        while not hit.is_set() and time.monotonic() < give_up:
            started = time.monotonic()
            assert w.push_events_once() == 0
            elapsed = time.monotonic() - started
            time.sleep(0.05)
        assert hit.is_set()
    assert elapsed < DEADLINE + 0.5, f"the push took {elapsed:.1f}s"
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT last_error FROM event_webhooks").fetchone()
    assert row == ("DEADLINE_EXCEEDED",)
