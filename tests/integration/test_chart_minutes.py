"""The console chart's transitions per minute, kept (issue 38, item 4;
migration 0049, store/transition_audit.py): whatever the folds have reached,
a transaction that committed late included, the minutes the chart reads
equal a recount of the last hour's transitions, tenant by tenant; past what
it can tell from the kept rows it says so, and the console recounts."""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import psycopg
import pytest

from tidings.observability.transition_rows import allowed_transitions
from tidings.store import console_reads, transition_audit

from .migration_text import migration_statement
from .plan_guard.params import intent_id

Conn = psycopg.Connection[Any]
TENANTS = ("a", "b", "c")
MOVES = [
    (None, "create", "pending"),
    ("pending", "claim", "sending"),
    ("sending", "accept", "accepted"),
    ("accepted", "deliver", "delivered"),
]


@pytest.fixture
def conn(db_url: str) -> Iterator[Conn]:
    with psycopg.connect(db_url, autocommit=True) as c:
        c.execute(
            "INSERT INTO tenants (tenant_id, name) SELECT t, t FROM unnest(%s::text[]) t",
            [list(TENANTS)],
        )
        for g in range(30):
            c.execute(
                """INSERT INTO intents (tenant_id, id, idempotency_key, request_hash, channel,
                                        state, version, recipient_ref, template_name, purpose,
                                        event_class, policy_version, attempt_count, created_by,
                                        created_at, updated_at)
                   VALUES (%s, %s, %s, 'h', 'sms', 'pending', 1, 'r', 'reset', 'security',
                           'account', 'p1', 0, 'test', now(), now())""",
                [TENANTS[g % 3], intent_id(g), f"k{g}"],
            )
        yield c


class Writer:
    """Transitions at random minutes of the last 70 (some before the
    chart's hour), each intent's versions in order."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.version = 0

    def write(self, conn: Conn, n: int, *, minutes_ago: float | None = None) -> None:
        for _ in range(n):
            self.version += 1
            g = self.rng.randrange(30)
            from_state, event, to_state = self.rng.choice(MOVES)
            ago = self.rng.uniform(0, 70) if minutes_ago is None else minutes_ago
            conn.execute(
                """INSERT INTO transitions (tenant_id, intent_id, version, from_state, to_state,
                                            event, actor, at)
                   VALUES (%s, %s, %s, %s, %s, %s, 'test', now() - %s * interval '1 minute')""",
                [TENANTS[g % 3], intent_id(g), self.version, from_state, to_state, event, ago],
            )


def _since(conn: Conn) -> datetime:
    row = conn.execute("SELECT date_trunc('minute', now()) - interval '59 minutes'").fetchone()
    assert row is not None
    return row[0]


def _as_counter(rows: list[Any]) -> Counter[tuple[Any, ...]]:
    return Counter({(r["minute"], r["from_state"], r["to_state"]): r["n"] for r in rows})


def _assert_kept_equals_recount(conn: Conn) -> None:
    since = _since(conn)
    for tenant in TENANTS:
        kept = transition_audit.changes_since(conn, tenant, since)
        assert kept is not None
        assert _as_counter(kept) == _as_counter(console_reads.state_changes(conn, tenant, since))


def _fold(conn: Conn, batch: int) -> None:
    with conn.transaction():
        transition_audit.fold(conn, allowed_transitions(), batch=batch)


def _folded_everything(conn: Conn, seconds: float = 30.0) -> None:
    # A fold stops below the oldest transaction running on the whole
    # server, which other databases' sessions may hold back for a while.
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        _fold(conn, 1000)
        left = conn.execute(
            """SELECT count(*) FROM transitions t, transition_audit_mark m
               WHERE (t.txid, t.id) > (m.folded_txid, m.folded_id)"""
        ).fetchone()
        if left == (0,):
            return
        time.sleep(0.2)
    raise AssertionError("the folds did not catch up")


def test_the_charts_minutes_equal_a_recount_whatever_the_folds_reached(conn: Conn) -> None:
    writer, rng = Writer(49), random.Random(49)
    for _ in range(5):
        writer.write(conn, rng.randrange(10, 60))
        _assert_kept_equals_recount(conn)  # partly folded
        _fold(conn, rng.choice([1, 4, 9, 1000]))
        _assert_kept_equals_recount(conn)
    _folded_everything(conn)
    _assert_kept_equals_recount(conn)
    kept = conn.execute("SELECT sum(n) FROM transition_minutes").fetchone()
    assert kept is not None and kept[0] > 0


def test_a_transition_committed_after_a_fold_passed_its_id_is_on_the_chart(
    conn: Conn, db_url: str
) -> None:
    writer = Writer(3)
    with psycopg.connect(db_url) as late:
        late.execute(
            """INSERT INTO transitions (tenant_id, intent_id, version, from_state, to_state,
                                        event, actor, at)
               VALUES ('a', %s, 1000, 'pending', 'sending', 'claim', 'late', now())""",
            [intent_id(0)],
        )
        writer.write(conn, 20, minutes_ago=1)
        _fold(conn, 1000)
        late.commit()
    _assert_kept_equals_recount(conn)
    _folded_everything(conn)
    _assert_kept_equals_recount(conn)


def test_past_its_limit_of_unfolded_rows_the_chart_says_it_cannot_tell(conn: Conn) -> None:
    _folded_everything(conn)
    Writer(5).write(conn, 12, minutes_ago=2)
    since = _since(conn)
    assert transition_audit.changes_since(conn, "a", since, at_most=12) is None
    assert transition_audit.changes_since(conn, "a", since, at_most=13) is not None


def test_rows_from_before_the_txid_not_folded_yet_are_on_the_chart(conn: Conn) -> None:
    Writer(6).write(conn, 30)
    conn.execute("UPDATE transitions SET txid = NULL")
    conn.execute("UPDATE transition_audit_mark SET unaudited_after = 0")
    _assert_kept_equals_recount(conn)
    _fold(conn, 7)
    _assert_kept_equals_recount(conn)


def test_minutes_older_than_two_hours_are_neither_kept_nor_left(conn: Conn) -> None:
    writer = Writer(7)
    writer.write(conn, 10, minutes_ago=150)
    _folded_everything(conn)
    assert conn.execute("SELECT count(*) FROM transition_minutes").fetchone() == (0,)
    writer.write(conn, 10, minutes_ago=30)
    _folded_everything(conn)
    conn.execute("UPDATE transition_minutes SET minute = minute - interval '100 minutes'")
    writer.write(conn, 1, minutes_ago=0)
    _folded_everything(conn)
    assert conn.execute("SELECT sum(n) FROM transition_minutes").fetchone() == (1,)


def test_the_migration_keeps_what_the_folds_counted_before_it(conn: Conn) -> None:
    writer = Writer(11)
    writer.write(conn, 40)
    _fold(conn, 17)  # some folded, some not
    conn.execute("DELETE FROM transition_minutes")
    conn.execute(migration_statement("0049_transition_minutes.sql", "INSERT"))
    _assert_kept_equals_recount(conn)
