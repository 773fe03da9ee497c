"""A send whose database work is cut off (the server terminated its
backend, as in a failover) is the database being away, not a bug: the
worker says so in one warning line, and the intent's lease recovers it.

Found by the hour's soak (issue #43): each such send logged `a send
failed unexpectedly` with a traceback, which reads as a bug at 3am.
"""

from __future__ import annotations

import logging
import time

import pytest

from tidings import ManualClock, Tidings
from tidings.dispatch.claim import Claimed
from tidings.dispatch.record import IntentOutcome, Sent

from .dispatch_helpers import offer, publish_offer_template, simulator, worker
from .test_worker_stop import running


def test_a_send_whose_connection_is_terminated_is_a_warning_not_an_error(
    tidings: Tidings, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    publish_offer_template(tidings)
    w = worker(tidings, simulator(clock))
    terminated: list[str] = []

    def send_cut_off(claimed: Claimed) -> Sent | IntentOutcome:
        terminated.append(str(claimed.intent.id))
        with tidings.db.transaction() as conn:  # the server ends this backend mid-send
            conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        raise AssertionError("the terminated backend answered")

    w.send = send_cut_off  # type: ignore[method-assign]
    caplog.set_level(logging.INFO, logger="tidings.worker")
    intent = offer(tidings)
    stop, loop, _ = running(w)
    try:
        deadline = time.monotonic() + 30
        while not any(r.levelno >= logging.WARNING for r in caplog.records):
            assert time.monotonic() < deadline, "the worker never tried the send"
            time.sleep(0.05)
    finally:
        stop.set()
        loop.join(30)
    assert terminated == [str(intent.id)]
    worker_lines = [r for r in caplog.records if r.name == "tidings.worker"]
    assert [r.levelno for r in worker_lines if r.levelno >= logging.WARNING] == [logging.WARNING]
    [line] = [r for r in worker_lines if r.levelno == logging.WARNING]
    assert "database" in line.getMessage() and line.exc_info is None
