"""Batch sizing from expiry, through the worker (seed 003, R003.9): claims
whose turn in the window would end after their token expires are handed
back with EXPIRES_BEFORE_TURN, due at their expiry, and never sent; when
that expiry comes, policy expires them."""

from __future__ import annotations

from datetime import timedelta

import psycopg

from tidings import ManualClock, Tidings
from tidings.dispatch.window import EXPIRES_BEFORE_TURN

from .dispatch_helpers import offer, publish_offer_template, sends, simulator, worker


def test_claims_that_would_expire_before_their_turn_go_back_unsent(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    publish_offer_template(tidings)
    expires = clock.now() + timedelta(seconds=30)
    ids = [offer(tidings, n, expires_at=expires).id for n in range(1, 7)]
    core = simulator(clock)
    w = worker(tidings, core)
    window = w._windows["sms"]
    # A slow provider, measured: 20 s a call, one thread. The first claim's
    # turn ends at 20 s, inside its 30 s; every later one's would not.
    window.threads, window.per_call = 1, 20.0
    claimed = w.claim("sms", 6)
    assert len(claimed) == 6
    w._hold(claimed)
    kept = w._hand_back_late("sms", claimed, ahead=0)
    assert len(kept) == 1
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT state, decision_code, next_due_at FROM intents WHERE id = ANY(%s) AND id <> %s",
            (ids, kept[0].intent.id),
        ).fetchall()
    assert len(rows) == 5
    assert {(state, code) for state, code, _ in rows} == {("pending", EXPIRES_BEFORE_TURN)}
    assert {due for _, _, due in rows} == {expires}
    assert sends(core) == []
    # Their expiry comes with no turn: policy expires them, nothing is sent.
    clock.advance(31)
    w.dispatch_once()
    with psycopg.connect(db_url) as conn:
        states = conn.execute(
            "SELECT DISTINCT state FROM intents WHERE id = ANY(%s) AND id <> %s",
            (ids, kept[0].intent.id),
        ).fetchall()
    assert states == [("expired",)]
    assert sends(core) == []
