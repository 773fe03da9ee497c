"""The lease heartbeat renews what it can and never waits on a locked row.

Waiting is how it deadlocked: the heartbeat updates all of a worker's
in-flight intents in one statement while the same worker records a group
of them in another transaction; each took row locks in its own order.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg

from tidings import ManualClock, Tidings

from .dispatch_helpers import offer, publish_offer_template, simulator, worker


def lease_of(db_url: str, intent_id: object) -> object:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT lease_expires_at FROM intents WHERE id = %s", (intent_id,)
        ).fetchone()
    assert row is not None
    return row[0]


def test_heartbeat_skips_a_row_being_recorded_and_renews_the_rest(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    publish_offer_template(tidings)
    w = worker(tidings, simulator(clock), lease_seconds=30.0)
    first, second = offer(tidings, 1), offer(tidings, 2)
    claimed = w.claim("sms", 10)
    w._hold(claimed)
    before = lease_of(db_url, first.id)
    clock.advance(10)
    with psycopg.connect(db_url) as recording:
        # Another transaction of the worker holds one of the rows.
        recording.execute("SELECT 1 FROM intents WHERE id = %s FOR UPDATE", (first.id,))
        renewed: list[int] = []
        beat = threading.Thread(target=lambda: renewed.append(w.heartbeat()))
        beat.start()
        beat.join(10)
        assert not beat.is_alive(), "the heartbeat waited on a locked row"
        recording.rollback()
    assert renewed == [1]
    assert lease_of(db_url, first.id) == before
    assert lease_of(db_url, second.id) == clock.now() + timedelta(seconds=w.config.lease_seconds)
