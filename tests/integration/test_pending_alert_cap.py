"""The pending alert's read at job scale (issue 38; alert_scans.sql,
alert_pending_too_long): it reads only unsent intents old enough to be
overdue, and at most `cap` + 1 overdue per tenant and state. Under the cap
its answer is the old read's, which read every unsent intent; past it the
oldest is still exact and the count says "at least"."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from tidings.domain.schedules import DEFAULT_MAX_PENDING_SECONDS
from tidings.store import alert_scans

from .plan_guard.params import intent_id

Conn = psycopg.Connection[Any]
NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
TENANTS = ("a", "b", "c")
# What each policy version says of max_pending_seconds: a number, nothing,
# not a number, past the limit either way (clamped, never an error).
WAITS: dict[str, Any] = {
    "short": 600,
    "hour": 3600,
    "none": None,
    "text": "forever",
    "huge": 10**12,
    "negative": -5,
}
# The old read, every unsent intent joined to its policy: the reference.
OLD_PENDING_TOO_LONG = """
WITH p AS (
    SELECT i.tenant_id, i.channel, i.id, i.event_class, i.decision_code,
           greatest(i.created_at, coalesce(i.not_before, i.created_at)) AS since,
           CASE WHEN jsonb_typeof(pol.document #> '{retry,max_pending_seconds}') = 'number'
                THEN least(greatest((pol.document #>> '{retry,max_pending_seconds}')::numeric,
                                    1), 31622400)::float8
                ELSE %(default_seconds)s END AS allowed_seconds
    FROM intents i
    LEFT JOIN policies pol ON pol.tenant_id = i.tenant_id AND pol.version = i.policy_version
    WHERE i.state IN ('pending', 'resend_due')
)
SELECT tenant_id, channel, count(*) AS intents, min(since) AS oldest_at,
       (array_agg(id ORDER BY since, id))[1] AS oldest_id,
       min(allowed_seconds) AS allowed_seconds,
       (array_agg(DISTINCT decision_code) FILTER (WHERE decision_code IS NOT NULL))[1:10]
           AS codes,
       (array_agg(DISTINCT event_class))[1:10] AS event_classes
FROM p
WHERE since + make_interval(secs => allowed_seconds) <= %(now)s
GROUP BY tenant_id, channel
"""
FIELDS = ("intents", "oldest_at", "oldest_id", "allowed_seconds", "codes", "event_classes")


@pytest.fixture
def conn(db_url: str) -> Iterator[Conn]:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as c:
        c.execute(
            "INSERT INTO tenants (tenant_id, name) SELECT t, t FROM unnest(%s::text[]) t",
            [list(TENANTS)],
        )
        for tenant in TENANTS[:2]:  # c has no policy at all: the default
            for version, wait in WAITS.items():
                retry: dict[str, Any] = {"base_seconds": 1, "max_seconds": 60, "jitter": 0}
                if wait is not None:
                    retry["max_pending_seconds"] = wait
                c.execute(
                    "INSERT INTO policies (tenant_id, version, name, document, published_at,"
                    " published_by) VALUES (%s, %s, 'p', %s, %s, 'test')",
                    [tenant, version, Jsonb({"retry": retry}), NOW - timedelta(days=30)],
                )
        yield c


def _intents(conn: Conn, rng: random.Random, count: int, start: int = 0) -> None:
    """Intents of every state that matters, created up to 10 hours before
    NOW, some scheduled by not_before (in the past or after NOW)."""
    for g in range(start, start + count):
        tenant = rng.choice(TENANTS)
        created = NOW - timedelta(seconds=rng.uniform(0, 10 * 3600))
        not_before = None
        if rng.random() < 0.3:
            not_before = created + timedelta(seconds=rng.uniform(0, 12 * 3600))
        version = None if tenant == "c" else rng.choice([*WAITS, None, "missing"])
        state = rng.choice(["pending", "pending", "resend_due", "sending", "accepted"])
        conn.execute(
            """INSERT INTO intents (tenant_id, id, idempotency_key, request_hash, channel, state,
                                    version, recipient_ref, template_name, purpose, event_class,
                                    policy_version, attempt_count, created_by, created_at,
                                    updated_at, not_before, next_due_at, decision_code,
                                    lease_owner, lease_expires_at)
               VALUES (%s, %s, %s, 'h', %s, %s, 1, 'r', 't', 'transactional', %s, %s, 0, 'test',
                       %s, %s, %s, %s, %s, %s, %s)""",
            [
                tenant,
                intent_id(g),
                f"k{g}",
                rng.choice(["sms", "email"]),
                state,
                rng.choice(["offer", "reset", "report"]),
                version,
                created,
                created,
                not_before,
                not_before or created,
                rng.choice([None, "RATE_LIMITED", "QUIET_HOURS", "PROVIDER_UNAVAILABLE"]),
                "w1" if state == "sending" else None,
                NOW + timedelta(minutes=1) if state == "sending" else None,
            ],
        )


def _by_group(rows: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[Any, ...]]:
    return {(r["tenant_id"], r["channel"]): tuple(r[f] for f in FIELDS) for r in rows}


def _old(conn: Conn, now: datetime) -> list[dict[str, Any]]:
    args = {"now": now, "default_seconds": DEFAULT_MAX_PENDING_SECONDS}
    return conn.execute(OLD_PENDING_TOO_LONG, args).fetchall()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_under_the_cap_the_answer_is_the_old_reads(conn: Conn, seed: int) -> None:
    rng = random.Random(seed)
    _intents(conn, rng, 600)
    for now in (NOW, NOW + timedelta(hours=3), NOW + timedelta(days=2)):
        old = _old(conn, now)
        new = alert_scans.pending_too_long(conn, now, DEFAULT_MAX_PENDING_SECONDS, 10_000)
        assert old, "the load has overdue intents"
        assert _by_group(new) == _by_group(old), now
        assert not any(r["intents_more"] for r in new)


def test_past_the_cap_the_oldest_is_exact_and_the_count_says_at_least(conn: Conn) -> None:
    rng = random.Random(7)
    _intents(conn, rng, 600)
    now = NOW + timedelta(days=2)  # every unsent intent is overdue
    old = _by_group(_old(conn, now))
    capped = alert_scans.pending_too_long(conn, now, DEFAULT_MAX_PENDING_SECONDS, 20)
    assert {(r["tenant_id"], r["channel"]) for r in capped} == set(old)
    for row in capped:
        full = dict(zip(FIELDS, old[(row["tenant_id"], row["channel"])], strict=True))
        assert row["intents_more"]
        assert (row["oldest_at"], row["oldest_id"]) == (full["oldest_at"], full["oldest_id"])
        assert row["intents"] <= full["intents"]
