"""Workers whose clocks are minutes off, beside normal ones (docs/scaling.md).

Each skewed worker runs under libfaketime (Debian's `faketime`, installed
by scripts/install-faketime: a missing library fails these tests, it never
skips them), its wall clock five minutes ahead of or behind the database's.
Leases, deadlines and retry times must still be judged on one clock, so:
no lease is taken over while its owner still holds it, nothing is sent
after its deadline, no provider's Retry-After is cut short, and no message
goes out twice. With `TIDINGS_CLOCK=system` (each host its own clock) each
of these fails; `test_the_faults_show_on_the_hosts_own_clock` keeps that
proof running, so the tests cannot pass for want of skew.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from harness.processes import await_exit, ledger, offers, simulator, start_worker, wait_until
from harness.skew import SKEW, skewed

from tests.conftest import TEST_SECRET, with_example_policy
from tidings import Tidings

SENT = {"accepted", "timeout_after_accept"}


@contextmanager
def workers(
    db_url: str, home: Path, sim: str, kinds: list[str], *args: str, clock: str = "database"
) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = []
    for n, kind in enumerate(kinds):
        env = {"TIDINGS_CLOCK": clock} if kind == "normal" else skewed(SKEW[kind], clock)
        log = home / f"worker-{n}-{kind}.log"
        with log.open("wb") as out:
            procs.append(start_worker(db_url, home, sim, *args, output=out, extra_env=env))
    try:
        for n, kind in enumerate(kinds):
            log = home / f"worker-{n}-{kind}.log"
            wait_until(lambda log=log: b"running" in log.read_bytes(), what=f"{kind} worker up")
        yield procs
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for n, (p, kind) in enumerate(zip(procs, kinds, strict=True)):
            await_exit(p, home / f"worker-{n}-{kind}.log")


def backdate(db_url: str, ids: list[Any]) -> None:
    """Due for ten minutes already (a backlog), so the worker behind takes
    part; it would not claim what is due by the database's clock only."""
    with psycopg.connect(db_url) as conn:
        conn.execute(
            "UPDATE intents SET next_due_at = now() - interval '10 minutes' WHERE id = ANY(%s)",
            (ids,),
        )


def engine(db_url: str) -> Tidings:
    return with_example_policy(Tidings(db_url, secret_key=TEST_SECRET))


def lease_takeovers(db_url: str) -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM transitions WHERE decision_code = 'LEASE_EXPIRED'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def states(db_url: str, ids: list[Any]) -> Counter[str]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT state FROM intents WHERE id = ANY(%s)", (ids,)).fetchall()
    return Counter(r[0] for r in rows)


def sends_per_intent(entries: list[dict[str, Any]]) -> Counter[str]:
    return Counter(intent_of(e) for e in entries if e["outcome"] in SENT)


def intent_of(entry: dict[str, Any]) -> str:
    return str(entry["idempotency_key"]).rsplit(":", 1)[0]


def held_leases(db_url: str, home: Path, clock: str) -> int:
    """Three workers, one each way, share slow calls (each holds its lease
    for two seconds, within a 20 s lease): how many leases were taken over."""
    with engine(db_url) as t:
        ids = offers(t, f"lease-{clock}", 60)
        backdate(db_url, ids)
        with simulator(seed=5, latency_ms=2000) as sim:
            with workers(
                db_url, home, sim, ["normal", "ahead", "behind"],
                "--lease-seconds", "20", "--sms-concurrency", "10", "--batch-size", "10",
                clock=clock,
            ):  # fmt: skip
                wait_until(
                    lambda: set(states(db_url, ids)) <= {"accepted", "delivered"},
                    timeout=120,
                    what="every offer sent",
                )
            entries = ledger(sim)
    per_intent = sends_per_intent(entries)
    assert len(per_intent) == len(ids)
    assert set(per_intent.values()) == {1}, per_intent
    return lease_takeovers(db_url)


def late_sends(db_url: str, home: Path, clock: str) -> int:
    """Offers whose deadline passed two minutes ago (by the database) reach
    a worker five minutes behind first: how many went out anyway."""
    with engine(db_url) as t:
        ids = offers(t, f"late-{clock}", 20)
        with psycopg.connect(db_url) as conn:
            conn.execute(
                "UPDATE intents SET expires_at = now() - interval '2 minutes' WHERE id = ANY(%s)",
                (ids,),
            )
        backdate(db_url, ids)
        with simulator(seed=6) as sim:
            with workers(db_url, home, sim, ["behind"], clock=clock):
                wait_until(
                    lambda: set(states(db_url, ids)) <= {"expired", "accepted", "delivered"},
                    timeout=60,
                    what="every offer settled",
                )
            with workers(db_url, home, sim, ["normal"], clock=clock):
                wait_until(
                    lambda: set(states(db_url, ids)) <= {"expired", "delivered"},
                    timeout=60,
                    what="every offer final",
                )
            entries = ledger(sim)
    return sum(sends_per_intent(entries).values())


def early_retries(db_url: str, home: Path, clock: str) -> int:
    """The provider answers 429 with Retry-After: 20 to everything for a
    while: how many calls of one intent came back sooner than it asked."""
    retry_after = 20
    with engine(db_url) as t:
        backdate(db_url, offers(t, f"retry-{clock}", 30))
        with simulator(seed=7, rate_429=1.0, retry_after_seconds=retry_after) as sim:
            # Small batches, so that every worker gets some of the offers.
            with workers(
                db_url, home, sim, ["normal", "ahead", "behind"], "--batch-size", "2", clock=clock
            ):
                wait_until(lambda: len(ledger(sim)) >= 1, what="the first calls")
                # The first 429 pauses the account for every worker until its
                # Retry-After: the calls after it show whether anyone came
                # back sooner, on its own clock, than the provider asked.
                wait_until(
                    lambda: _seconds_since_first(ledger(sim)) >= retry_after + 2,
                    timeout=90,
                    what="calls after the first Retry-After",
                )
                httpx.put(f"{sim}/_config", json={"rate_429": 0.0}, timeout=5).raise_for_status()
            entries = ledger(sim)
    calls: dict[str, list[datetime]] = defaultdict(list)
    for e in entries:
        calls[intent_of(e)].append(datetime.fromisoformat(e["received_at"]))
    early = 0
    for times in calls.values():
        times.sort()
        # The simulator stamps a request when it reads it: a second of slack.
        gaps = [b - a for a, b in itertools.pairwise(times)]
        early += sum(1 for g in gaps if g < timedelta(seconds=retry_after - 1))
    return early


def _seconds_since_first(entries: list[dict[str, Any]]) -> float:
    if not entries:
        return 0.0
    times = sorted(datetime.fromisoformat(e["received_at"]) for e in entries)
    return (times[-1] - times[0]).total_seconds() if len(times) > 1 else 0.0


def test_no_lease_is_taken_over_while_its_owner_holds_it(db_url: str, tmp_path: Path) -> None:
    assert held_leases(db_url, tmp_path, "database") == 0


def test_nothing_is_sent_after_its_deadline(db_url: str, tmp_path: Path) -> None:
    assert late_sends(db_url, tmp_path, "database") == 0


def test_no_retry_comes_before_the_providers_retry_after(db_url: str, tmp_path: Path) -> None:
    assert early_retries(db_url, tmp_path, "database") == 0


@pytest.mark.skipif(
    not os.environ.get("TIDINGS_TEST_DATABASE_URL"),
    # It proves the harness (the skew is real), not the product on either
    # database: once per CI run, in the system PostgreSQL's pass, is enough.
    reason="the proof of the harness runs in the system PostgreSQL's pass",
)
# Not "retry" nor "lease": a 429 or a run of slow answers pauses the provider
# account for every worker, and a worker ahead of the others writes that
# pause from its own clock, so on the hosts' clocks everyone waits out its
# skew (the lease run then never finishes its sends); the runs above on the
# database clock still catch a Retry-After cut short and a lease taken early.
@pytest.mark.parametrize("fault", ["deadline"])
def test_the_faults_show_on_the_hosts_own_clock(db_url: str, tmp_path: Path, fault: str) -> None:
    """The same run on each host's own clock: the property breaks. This is
    what the database clock prevents, and proves the skew is real."""
    assert late_sends(db_url, tmp_path, "system") > 0
