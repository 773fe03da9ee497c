"""The durable call-started mark against lease recovery (invariant 3).

A slow worker whose lease ran out and the sweeper recovering it race for
the same claim. Exactly one wins: either the mark commits first (the call
goes out, recovery finds the mark and reconciles) or recovery does (the
claim is undone, the mark finds nothing to mark and the call is withheld).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import psycopg

from tidings import IntentState, ManualClock, Tidings
from tidings.dispatch.call_start import Verdict
from tidings.dispatch.reconcile import recover_leases
from tidings.dispatch.runner import Worker

from .dispatch_helpers import offer, publish_offer_template, sends, simulator, worker


def wait_for_lock(db_url: str, what: Callable[[], bool]) -> None:
    """Until another session waits on a row lock (the mark behind recovery)."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        for _ in range(500):
            waiting = conn.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE wait_event_type = 'Lock' AND datname = current_database()"
            ).fetchone()
            if (waiting and waiting[0]) or what():
                return
            threading.Event().wait(0.01)
    raise AssertionError("the mark never waited on the recovery's lock")


def test_recovery_that_locks_first_undoes_the_claim_and_the_mark_withholds_the_call(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core, lease_seconds=30)
    intent = offer(tidings)
    [claimed] = w.claim("sms", 10)
    clock.advance(31)  # the worker is slow, not dead: its lease ran out
    verdicts: list[Verdict] = []
    marker = threading.Thread(target=lambda: verdicts.append(w._starts.verdict(claimed)))
    with tidings.db.transaction() as conn:
        assert recover_leases(conn, clock.now()) == 1
        marker.start()  # its statement waits on the attempt row recovery holds
        wait_for_lock(db_url, lambda: bool(verdicts))
    marker.join(10)
    assert verdicts == [Verdict.WITHDRAWN]
    got = tidings.get(intent.id)
    assert got.state is IntentState.PENDING and got.attempts == ()
    assert sends(core) == []
    w.dispatch_once()  # the claim again, under the same attempt
    assert [e["idempotency_key"] for e in sends(core)] == [claimed.attempt_key]


def test_a_mark_that_commits_first_makes_recovery_reconcile_instead(
    tidings: Tidings, clock: ManualClock
) -> None:
    w, intent = _marked_then_lease_ran_out(tidings, clock)
    assert w.sweep_once()["leases_recovered"] == 1
    got = tidings.get(intent.id)
    assert got.state is IntentState.RECONCILING
    [attempt] = got.attempts
    assert attempt.state == "unknown" and attempt.code == "LEASE_EXPIRED"
    assert attempt.call_started_at is not None
    assert w.dispatch_once() == 0  # unknown is never a reason to send again


def test_a_mark_refuses_a_claim_canceled_since_and_a_claim_another_worker_holds(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core, lease_seconds=30)
    first = offer(tidings, 1)
    second = offer(tidings, 2)
    claims = {c.intent.id: c for c in w.claim("sms", 10)}
    tidings.cancel(first.id, reason="member_left")
    assert w._starts.verdict(claims[first.id]) is Verdict.WITHDRAWN
    clock.advance(31)
    w.sweep_once()  # recovered: undone, due again
    rival = worker(tidings, core, lease_seconds=30)
    [taken] = rival.claim("sms", 10)
    assert taken.intent.id == second.id
    assert w._starts.verdict(claims[second.id]) is Verdict.WITHDRAWN
    assert rival._starts.verdict(taken) is Verdict.GO
    with tidings.db.statements() as conn:
        marks = conn.execute(
            "SELECT intent_id, n, call_started_at IS NOT NULL AS marked FROM attempts"
        ).fetchall()
    # The canceled claim's attempt is left unmarked (the send path then
    # closes it as WITHDRAWN); the other worker's claim alone is marked.
    assert {(m["intent_id"], m["n"], m["marked"]) for m in marks} == {
        (first.id, 1, False),
        (second.id, 1, True),
    }


def test_recovery_leaves_an_attempt_its_worker_is_recording_to_the_next_sweep(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    """A worker records what its call did: the attempt's row first, then the
    intent's. The sweeper has locked the intent (its lease ran out meanwhile)
    and must not wait for the attempt, or the two deadlock (seen once at
    load 35, docs/benchmarks.md). It skips the intent; the next sweep finds
    what the worker recorded."""
    w, intent = _marked_then_lease_ran_out(tidings, clock)
    with psycopg.connect(db_url) as recorder:
        recorder.execute("SELECT 1 FROM attempts WHERE intent_id = %s FOR UPDATE", [intent.id])
        locked: list[bool] = []
        with tidings.db.transaction() as conn:
            # Were the sweeper to wait, this would fail after five seconds.
            conn.execute("SET LOCAL lock_timeout = '5s'")
            assert recover_leases(conn, clock.now()) == 0
            # The recorder's next statement waits for the sweep, not the reverse.
            waiter = threading.Thread(
                target=lambda: locked.append(
                    recorder.execute(
                        "SELECT 1 FROM intents WHERE id = %s FOR UPDATE", [intent.id]
                    ).fetchone()
                    is not None
                )
            )
            waiter.start()
            wait_for_lock(db_url, lambda: bool(locked))
        waiter.join(10)
        assert locked == [True]
        recorder.rollback()
    assert tidings.get(intent.id).state is IntentState.SENDING
    assert w.sweep_once()["leases_recovered"] == 1
    got = tidings.get(intent.id)
    assert got.state is IntentState.RECONCILING
    assert got.attempts[0].code == "LEASE_EXPIRED"


def _marked_then_lease_ran_out(tidings: Tidings, clock: ManualClock) -> tuple[Worker, Any]:
    """One offer claimed and marked as called, its worker's lease run out."""
    publish_offer_template(tidings)
    w = worker(tidings, simulator(clock), lease_seconds=30)
    intent = offer(tidings)
    [claimed] = w.claim("sms", 10)
    assert w._starts.verdict(claimed) is Verdict.GO
    clock.advance(31)
    return w, intent
