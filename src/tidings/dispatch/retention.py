"""Retention: four clocks, each honoured on its own (docs/retention.md).

Receipts go at `observation_days`, an intent's attempts, transitions and
events at `attempt_evidence_days` after it ended, the recipient decision
(the intent, and a job's frozen recipients) at `recipient_evidence_days`
(a job's `evidence_expires_at`), and a job's own facts, with the final
counts kept on it, at `job_facts_days` (its `facts_expire_at`). Each
clock comes from the policy version the evidence was decided under, never
from whatever policy is current.

The evidence tables are partitioned by month: a month whose intents are
all past a clock goes whole (dispatch/retention_months.py), and so does
one past every clock that only a few intents still need, whose rows move
to the default partition first. Row by row go: what a month that many
intents still need keeps past some intents' clock, and what the default
partitions hold (evidence of no month, or kept when its month went).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import psycopg

from tidings.dispatch.retention_months import Clocks, drop_due_months, overdue_kept
from tidings.domain.evidence_months import IdRange
from tidings.domain.policy_bounds import MAX_RETENTION_DAYS
from tidings.domain.policy_document import Retention
from tidings.store import evidence_partitions, policies, retention
from tidings.store.database import Database
from tidings.store.evidence_partitions import EvidenceMonth
from tidings.store.isolation import FAILS_ALONE, note_alone

Conn = psycopg.Connection[Any]

BATCH = 1000
COUNTS = (
    "intents",
    "attempts",
    "observations",
    "job_recipients",
    "jobs",
    "audience_uploads",
    "destinations",
    "rate_counters",
)
# Rate windows are kept this long after they end: the request-anomaly
# baseline (domain/request_anomaly.py) reads a day of ended hourly windows.
RATE_WINDOWS_KEPT = timedelta(days=2)


def purge(db: Database, now: datetime) -> dict[str, Any]:
    """Everything past its clock; returns what each kind lost, and the
    months whose partitions were dropped whole (`months_dropped`)."""
    removed: dict[str, Any] = dict.fromkeys(COUNTS, 0)
    evidence_partitions.ensure(db, now)
    with db.transaction() as conn:
        groups = retention.groups(conn)
    clocks, set_aside = _clocks(db, groups, now)
    for key, clock in clocks.items():
        if key not in set_aside:
            _alone(db, key, now, partial(_snapshot_jobs, db, key, clock, now))
    with db.transaction() as conn:
        months = evidence_partitions.registered(conn)
    removed["months_dropped"] = drop_due_months(db, months, clocks, now)
    with db.transaction() as conn:
        months = evidence_partitions.registered(conn)
    for group in groups:
        key = (group["tenant_id"], group["policy_version"])
        if key in set_aside:
            continue

        def one(k: tuple[str, str] = key, oldest: datetime = group["oldest"]) -> None:
            for kind, n in _purge_group(db, k, clocks, months, oldest, now).items():
                removed[kind] += n

        _alone(db, key, now, one)
    shortest = min((c.observation_days for c in clocks.values()), default=90)
    with db.transaction() as conn:
        before = now - timedelta(days=shortest)
        removed["observations"] += retention.unmatched_observations(conn, before)
        removed["job_recipients"] = retention.job_recipients(conn, now)
        removed["jobs"] = retention.jobs(conn, now)
        removed["audience_uploads"] = retention.expired_uploads(conn, now)
        removed["destinations"] = retention.orphan_destinations(conn)
    ended = {"before": now - RATE_WINDOWS_KEPT, "limit": BATCH}
    removed["rate_counters"] = _in_batches(db, retention.rate_counters, ended, None)
    return removed


# The clock of a group whose policy version cannot be read (missing,
# quarantined, past the limits): nothing of it is purged, since its clocks
# are unknown, and the months holding it are not dropped whole; everyone
# else's evidence in them still goes row by row (docs/retention.md).
KEEP_ALL = Retention(*(MAX_RETENTION_DAYS,) * 4)


def _clocks(
    db: Database, groups: list[dict[str, Any]], now: datetime
) -> tuple[dict[tuple[str, str], Retention], set[tuple[str, str]]]:
    """Each group's clocks; and the groups set aside (store/isolation.py)."""
    clocks: dict[tuple[str, str], Retention] = {}
    set_aside: set[tuple[str, str]] = set()
    for g in groups:
        key = (g["tenant_id"], g["policy_version"])
        try:
            with db.transaction() as conn:
                clocks[key] = policies.by_version(conn, *key).retention
        except FAILS_ALONE as exc:
            note_alone(db, key[0], "purge", f"policy:{key[1]}", exc, now)
            clocks[key] = KEEP_ALL
            set_aside.add(key)
    return clocks, set_aside


def _alone(db: Database, key: tuple[str, str], now: datetime, work: Callable[[], None]) -> None:
    """One group's purge; a failure of its rows stops only that group."""
    try:
        work()
    except FAILS_ALONE as exc:
        note_alone(db, key[0], "purge", f"policy:{key[1]}", exc, now)


def _snapshot_jobs(db: Database, key: tuple[str, str], clock: Retention, now: datetime) -> None:
    # A job's final counts and cost are kept on it before the first of its
    # evidence goes, whole months included.
    tenant, version = key
    attempts_before = now - timedelta(days=clock.attempt_evidence_days)
    with db.transaction() as conn:
        retention.snapshot_job_counts(conn, tenant, version, now, attempts_before)


def _purge_group(
    db: Database,
    key: tuple[str, str],
    clocks: Clocks,
    months: list[EvidenceMonth],
    oldest: datetime,
    now: datetime,
) -> dict[str, int]:
    tenant, version = key
    clock = clocks[key]
    group = {"tenant_id": tenant, "policy_version": version, "now": now, "limit": BATCH}
    removed = {"observations": 0, "attempts": 0, "intents": 0}
    if oldest >= now - timedelta(days=min(_days(clock))) and not _job_evidence_due(db, group):
        return removed  # nothing of this group is old enough for any clock
    observations = {**group, "before": now - timedelta(days=clock.observation_days)}
    default = partial(retention.observations, in_month=False)
    removed["observations"] = _in_batches(db, default, observations, None)
    in_month = partial(retention.observations, in_month=True)
    for ids in overdue_kept(months, "observations_dropped_at", clock.observation_days, now):
        removed["observations"] += _in_batches(db, in_month, observations, ids)
    attempts = {**group, "before": now - timedelta(days=clock.attempt_evidence_days)}
    removed["attempts"] = _attempts_in_batches(db, attempts, None)
    days = clock.attempt_evidence_days
    for ids in overdue_kept(months, "attempts_dropped_at", days, now):
        removed["attempts"] += _attempts_in_batches(db, attempts, ids)
    recipients_before = now - timedelta(days=clock.recipient_evidence_days)
    removed["intents"] = _in_batches(
        db, retention.intents, {**group, "before": recipients_before}, None
    )
    return removed


def _job_evidence_due(db: Database, group: dict[str, Any]) -> bool:
    # A job's recipients go at its own evidence_expires_at, which no
    # intent's end time bounds.
    with db.transaction() as conn:
        return retention.job_evidence_due(conn, group)


def _days(clock: Retention) -> tuple[int, ...]:
    return (clock.observation_days, clock.attempt_evidence_days, clock.recipient_evidence_days)


def _attempts_in_batches(db: Database, params: dict[str, Any], ids: IdRange | None) -> int:
    """Attempts removed, a batch of intents per transaction."""
    bounded = {**params, **(ids.as_params() if ids else {})}
    total = 0
    while True:
        with db.transaction() as conn:
            removed, visited = retention.attempt_evidence(conn, bounded, in_month=ids is not None)
        total += removed
        if visited < BATCH:
            return total


def _in_batches(
    db: Database,
    purge: Callable[[Conn, retention.Batch], int],
    params: dict[str, Any],
    ids: IdRange | None,
) -> int:
    bounded = {**params, **(ids.as_params() if ids else {})}
    total = 0
    while True:
        with db.transaction() as conn:
            n = purge(conn, bounded)
        total += n
        if n < BATCH:
            return total
