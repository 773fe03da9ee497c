"""Waking workers for new intents (store/wakeups.py).

A create that commits alone must not NOTIFY from its own transaction: the
notification-queue lock would be held through its commit and serialize
every create. It wakes the workers after it committed, through the
process's waker; a create in the caller's transaction still notifies at
that transaction's commit, and not before."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from fastapi.testclient import TestClient

from tidings import Tidings

from .api_support import intent_body
from .dispatch_helpers import offer, publish_offer_template


@contextmanager
def listener(db_url: str) -> Iterator[list[str]]:
    """The channels every `tidings_due` notification named, as they arrive."""
    heard: list[str] = []
    ready, stop = threading.Event(), threading.Event()

    def listen() -> None:
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute("LISTEN tidings_due")
            ready.set()
            while not stop.is_set():
                for note in conn.notifies(timeout=0.05, stop_after=1):
                    heard.append(note.payload)

    thread = threading.Thread(target=listen)
    thread.start()
    assert ready.wait(10)
    try:
        yield heard
    finally:
        stop.set()
        thread.join(10)


def heard_within(heard: list[str], count: int, seconds: float = 5.0) -> bool:
    done = threading.Event()

    def check() -> None:
        while len(heard) < count and not done.is_set():
            done.wait(0.01)  # another thread's progress, not a timed wait

    watcher = threading.Thread(target=check)
    watcher.start()
    watcher.join(seconds)
    done.set()
    return len(heard) >= count


def test_a_create_committed_alone_wakes_the_workers_after_its_commit(
    tidings: Tidings, db_url: str
) -> None:
    publish_offer_template(tidings)
    sent: list[Any] = []
    real = tidings.runtime.waker.due  # type: ignore[union-attr]

    def due(channel: str) -> None:
        # Called only once the intent is committed: another connection sees it.
        with psycopg.connect(db_url) as conn:
            sent.append(conn.execute("SELECT count(*) FROM intents").fetchone())
        real(channel)

    tidings.runtime.waker.due = due  # type: ignore[union-attr,method-assign]
    with listener(db_url) as heard:
        offer(tidings, 1)
        assert heard_within(heard, 1), "no wake-up after the create"
    assert heard == ["sms"] and sent == [(1,)]


def test_a_create_committed_alone_sends_no_notify_of_its_own(tidings: Tidings, db_url: str) -> None:
    """Only the waker notifies for it: the create's commit never takes the
    notification queue's lock, so creates do not wait on each other's."""
    publish_offer_template(tidings)
    asked: list[str] = []
    tidings.runtime.waker.due = asked.append  # type: ignore[union-attr,method-assign]
    with listener(db_url) as heard:
        offer(tidings, 1)
        assert not heard_within(heard, 1, 0.5)
    assert asked == ["sms"]


def test_wake_ups_asked_for_together_go_as_one(tidings: Tidings, db_url: str) -> None:
    waker = tidings.runtime.waker
    assert waker is not None
    with listener(db_url) as heard:
        for _ in range(50):
            waker.due("sms")
        waker.due("email")
        waker.close()  # sends what is asked for, then stops
        assert heard_within(heard, 2)
    assert set(heard) == {"sms", "email"} and len(heard) < 51


def test_a_create_in_the_callers_transaction_wakes_at_its_commit(
    tidings: Tidings, db_url: str
) -> None:
    publish_offer_template(tidings)
    calls: list[str] = []
    tidings.runtime.waker.due = calls.append  # type: ignore[union-attr,method-assign]
    with listener(db_url) as heard, psycopg.connect(db_url) as conn:
        conn.execute("SELECT 1")  # the caller's transaction, with its own work in it
        offer(tidings, 1, conn=conn)
        assert not heard_within(heard, 1, 0.5), "woken before the caller committed"
        conn.commit()
        assert heard_within(heard, 1), "not woken at the caller's commit"
    assert calls == []  # the transaction's own NOTIFY, not the waker


def test_an_api_create_wakes_the_workers(tidings: Tidings, api: TestClient, db_url: str) -> None:
    with listener(db_url) as heard:
        answer = api.post("/v1/intents", json=intent_body(tidings))
        assert answer.status_code == 201, answer.text
        assert heard_within(heard, 1)
    assert heard == ["sms"]
