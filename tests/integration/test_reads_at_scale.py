"""Reads at scale (issue 38): what the metrics scrape, the alert round and
the console read instead of a pass over every transition or receipt gives
the same answers as that pass did.

- The transition audit is kept (migration 0038, store/transition_audit.py):
  after any mix of transitions, folded in small batches, a transaction that
  committed late included, the kept counts equal a recount of the rows.
- The newest reconciliation per tenant and channel is read from an index
  (migration 0037): it equals the old join of every receipt to its attempt.

The plan guard (test_plan_guard.py) shows the reads are bounded.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from tidings.observability.transition_rows import allowed_transitions
from tidings.store import alert_scans, console_reads, metrics_reads, transition_audit

from .migration_text import migration_statement
from .plan_guard.params import intent_id

Conn = psycopg.Connection[Any]
START = datetime(2026, 1, 1, tzinfo=UTC)
TENANTS = ("a", "b", "c")
# A move the table allows, one it forbids, and the two lease recoveries.
MOVES = [
    ("pending", "claim", "sending", None),
    ("pending", "claim", "sending", None),
    ("delivered", "claim", "sending", None),
    ("sending", "lease_expired", "pending", "LEASE_EXPIRED"),
    ("sending", "call_not_started", "pending", "CALL_NOT_STARTED"),
]

RECOUNT = """
WITH allowed AS (
    SELECT * FROM unnest(%(froms)s::text[], %(events)s::text[], %(tos)s::text[])
        AS a (from_state, event, to_state)
)
SELECT t.tenant_id,
       count(*) FILTER (WHERE t.decision_code IN ('LEASE_EXPIRED', 'CALL_NOT_STARTED'))
           AS lease_recoveries,
       count(*) FILTER (WHERE a.event IS NULL) AS impossible,
       ((array_agg(t.id ORDER BY t.id) FILTER (WHERE a.event IS NULL))[1:5]) AS samples
FROM transitions t
LEFT JOIN allowed a
  ON a.from_state = coalesce(t.from_state, '') AND a.event = t.event AND a.to_state = t.to_state
GROUP BY t.tenant_id
"""

OLD_LAST_RECONCILIATION = """
SELECT o.tenant_id, a.channel, max(o.received_at) AS at
FROM observations o
JOIN attempts a ON a.tenant_id = o.tenant_id AND a.intent_id = o.intent_id AND a.n = o.attempt_n
WHERE o.source IN ('poll', 'lookup', 'webhook')
GROUP BY o.tenant_id, a.channel
"""


@pytest.fixture
def conn(db_url: str) -> Iterator[Conn]:
    with psycopg.connect(db_url, autocommit=True) as c:
        c.execute(
            "INSERT INTO tenants (tenant_id, name) SELECT t, t FROM unnest(%s::text[]) t",
            [list(TENANTS)],
        )
        for g in range(30):
            _intent(c, TENANTS[g % 3], g, "sms" if g % 2 else "email")
        yield c


def _intent(conn: Conn, tenant: str, g: int, channel: str) -> None:
    at = START + timedelta(seconds=g)
    conn.execute(
        """INSERT INTO intents (tenant_id, id, idempotency_key, request_hash, channel, state,
                                version, recipient_ref, template_name, purpose, event_class,
                                policy_version, attempt_count, created_by, created_at,
                                updated_at)
           VALUES (%s, %s, %s, 'h', %s, 'pending', 1, 'r', 'reset', 'security', 'account',
                   'p1', 0, 'test', %s, %s)""",
        [tenant, intent_id(g), f"k{g}", channel, at, at],
    )


def _transitions(conn: Conn, rng: random.Random, n: int, *, version_from: int) -> None:
    for v in range(version_from, version_from + n):
        g = rng.randrange(30)
        from_state, event, to_state, code = rng.choice(MOVES)
        conn.execute(
            """INSERT INTO transitions (tenant_id, intent_id, version, from_state, to_state,
                                        event, actor, decision_code, at)
               VALUES (%s, %s, %s, %s, %s, %s, 'test', %s, %s)""",
            [TENANTS[g % 3], intent_id(g), v, from_state, to_state, event, code, START],
        )


def _recount(conn: Conn) -> dict[str, tuple[int, int, list[int]]]:
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(RECOUNT, allowed_transitions()).fetchall()
    return {
        r["tenant_id"]: (r["lease_recoveries"], r["impossible"], r["samples"] or [])
        for r in rows
        if r["lease_recoveries"] or r["impossible"]
    }


def _kept(conn: Conn) -> dict[str, tuple[int, int, list[int]]]:
    allowed = allowed_transitions()
    samples = {
        r["tenant_id"]: [s["transition_id"] for s in r["samples"]]
        for r in alert_scans.impossible_transitions(conn, allowed)
    }
    return {
        r["tenant_id"]: (r["lease_recoveries"], r["impossible"], samples.get(r["tenant_id"], []))
        for r in metrics_reads.transition_audit(conn, allowed)
        if r["lease_recoveries"] or r["impossible"]
    }


def _fold_until_equal(conn: Conn, *, batch: int, seconds: float = 30.0) -> None:
    # A fold counts only below the oldest transaction running on the whole
    # server, which other databases' sessions may hold back for a while.
    deadline = time.monotonic() + seconds
    while True:
        with conn.transaction():
            transition_audit.fold(conn, allowed_transitions(), batch=batch)
        if _kept(conn) == _recount(conn) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert _kept(conn) == _recount(conn)


def test_the_kept_audit_equals_a_recount_after_random_transitions(conn: Conn) -> None:
    rng = random.Random(38)
    version = 1
    for _ in range(4):
        n = rng.randrange(5, 40)
        _transitions(conn, rng, n, version_from=version)
        version += n
        _fold_until_equal(conn, batch=rng.choice([1, 3, 7, 100]))
    assert any(impossible for _, impossible, _ in _recount(conn).values())


def test_rows_older_than_the_txid_are_folded_once_by_id(conn: Conn) -> None:
    # Rows written before migration 0038 have no txid: folded by id, once.
    _transitions(conn, random.Random(1), 25, version_from=1)
    conn.execute("UPDATE transitions SET txid = NULL")
    conn.execute("UPDATE transition_audit_mark SET unaudited_after = 0")
    _fold_until_equal(conn, batch=4)
    mark = conn.execute("SELECT unaudited_after FROM transition_audit_mark").fetchone()
    assert mark == (None,)
    _transitions(conn, random.Random(2), 10, version_from=100)
    _fold_until_equal(conn, batch=4)


def test_a_transition_committed_late_is_counted_by_the_next_fold(conn: Conn, db_url: str) -> None:
    # A takes its id (and its txid) first, B commits, a fold runs, then A
    # commits: an id cursor would have moved past A's id with B's.
    with psycopg.connect(db_url) as a:
        a.execute(
            """INSERT INTO transitions (tenant_id, intent_id, version, from_state, to_state,
                                        event, actor, decision_code, at)
               VALUES ('a', %s, 1, 'sending', 'pending', 'lease_expired', 'A',
                       'LEASE_EXPIRED', %s)""",
            [intent_id(0), START],
        )
        _transitions(conn, random.Random(3), 12, version_from=10)
        with conn.transaction():
            transition_audit.fold(conn, allowed_transitions())
        a_row = a.execute("SELECT id, txid::text FROM transitions WHERE actor = 'A'").fetchone()
        assert a_row is not None
        assert a_row[0] < max(r[0] for r in conn.execute("SELECT id FROM transitions"))
        # The fold stopped below A's transaction, B's rows after it included.
        behind = conn.execute(
            "SELECT folded_txid < %s::xid8 FROM transition_audit_mark", [a_row[1]]
        ).fetchone()
        assert behind == (True,)
        a.commit()
    _fold_until_equal(conn, batch=5)


def test_two_folds_at_once_count_each_transition_once(conn: Conn, db_url: str) -> None:
    _transitions(conn, random.Random(4), 30, version_from=1)
    with psycopg.connect(db_url) as other:
        # `other` folds in its open transaction and holds the mark: this fold
        # counts nothing and waits for nothing.
        other.execute("SELECT 1")
        transition_audit.fold(other, allowed_transitions(), batch=7)
        with conn.transaction():
            assert transition_audit.fold(conn, allowed_transitions()) == 0
        other.commit()
    _fold_until_equal(conn, batch=7)


def test_an_impossible_move_stops_paging_once_its_transition_is_purged(conn: Conn) -> None:
    conn.execute(
        """INSERT INTO transitions (tenant_id, intent_id, version, from_state, to_state,
                                    event, actor, at)
           VALUES ('b', %s, 1, 'delivered', 'sending', 'claim', 'test', %s)""",
        [intent_id(1), START],
    )
    _fold_until_equal(conn, batch=10)
    assert alert_scans.impossible_transitions(conn, allowed_transitions())
    conn.execute("DELETE FROM transitions WHERE tenant_id = 'b'")
    assert alert_scans.impossible_transitions(conn, allowed_transitions()) == []


def _attempt_and_receipts(
    conn: Conn, rng: random.Random, g: int, tenant: str, channel: str
) -> None:
    iid = intent_id(g)
    conn.execute(
        """INSERT INTO attempts (tenant_id, intent_id, n, attempt_key, channel, state, provider,
                                 provider_message_id, created_at)
           VALUES (%s, %s, 1, %s, %s, 'accepted', 'twilio', %s, %s)""",
        [tenant, iid, f"{iid}.1", channel, f"SM{g}", START],
    )
    for k in range(rng.randrange(4)):
        source = rng.choice(["poll", "lookup", "webhook", "send"])
        received = START + timedelta(minutes=rng.randrange(10_000))
        conn.execute(
            """INSERT INTO observations (tenant_id, provider, dedupe_key, intent_id, attempt_n,
                                         provider_message_id, status, source, received_at,
                                         channel)
               VALUES (%s, 'twilio', %s, %s, 1, %s, 'delivered', %s, %s, %s)""",
            [tenant, f"SM{g}:{k}", iid, f"SM{g}", source, received, channel],
        )


def test_the_newest_reconciliation_per_channel_equals_the_join(conn: Conn) -> None:
    rng = random.Random(37)
    for g in range(30):
        _attempt_and_receipts(conn, rng, g, TENANTS[g % 3], rng.choice(["sms", "email"]))
    old = {(r["tenant_id"], r["channel"]): r["at"] for r in _rows(conn, OLD_LAST_RECONCILIATION)}
    assert len(old) > 3
    new = {(r["tenant_id"], r["channel"]): r["at"] for r in metrics_reads.last_reconciliation(conn)}
    assert new == old
    for tenant in TENANTS:
        mine = {c: at for (t, c), at in old.items() if t == tenant}
        assert console_reads.last_reconciliation(conn, tenant) == mine
    # Rows from before 0037 carry no channel; the migration names it on
    # each channel's newest, which is all the read needs.
    conn.execute("UPDATE observations SET channel = NULL")
    conn.execute(migration_statement("0037_reconciliation_channel.sql", "UPDATE"))
    new = {(r["tenant_id"], r["channel"]): r["at"] for r in metrics_reads.last_reconciliation(conn)}
    assert new == old
    named = conn.execute("SELECT count(*) FROM observations WHERE channel IS NOT NULL").fetchone()
    assert named is not None and named[0] <= len(old) * 2


def _rows(conn: Conn, sql: str) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql).fetchall()
