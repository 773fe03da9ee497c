"""Whole months of evidence dropped at once (docs/retention.md).

The evidence tables are partitioned by the month their intent was created
in (store/evidence_partitions.py). Once a month has ended and every intent
of it is past its own policy's clock, the month's partitions are dropped:
millions of rows go in one catalog change, with no row deleted, no dead
rows left for vacuum, and nothing for dispatch to wait on but the moment
the partition is detached. A month past every clock that a few intents
still need (not final yet, ended late, a job without its final counts)
goes too: their rows move to the default partition first. A month that
many still need stays; retention then takes its other intents row by row,
once the month is overdue for their clock, so no evidence outlives its
clock by more than the rest of the month it was created in.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from tidings.domain.evidence_months import (
    ATTEMPT_EVIDENCE,
    OBSERVATIONS,
    IdRange,
    Month,
    overdue,
)
from tidings.domain.policy_document import Retention
from tidings.policies import load_builtin
from tidings.store import evidence_partitions, retention
from tidings.store.database import Database
from tidings.store.evidence_partitions import EvidenceMonth

log = logging.getLogger("tidings.retention")

Clocks = Mapping[tuple[str, str], Retention]

# Intents decided under no policy (POLICY_MISSING) have no clock of their
# own: a month holding them goes by the shipped example policy's clocks.
NO_POLICY = load_builtin("default").retention
# A month past every clock goes even while some intents of it still need
# their evidence (not final yet, ended late): at most this many, whose rows
# move to the default partition in the transaction that drops the month.
MOST_KEPT = 10_000


def drop_due_months(
    db: Database, months: list[EvidenceMonth], clocks: Clocks, now: datetime
) -> list[str]:
    """Drop what is due of each month; returns what went, as `month: tables`."""
    dropped = []
    plan: tuple[tuple[str, retention.Evidence, str, tuple[str, ...]], ...] = (
        ("attempts_dropped_at", "attempts", "attempt_evidence_days", ATTEMPT_EVIDENCE),
        ("observations_dropped_at", "observations", "observation_days", OBSERVATIONS),
    )
    for month in months:
        for mark, evidence, field, tables in plan:
            if getattr(month, mark) is not None:
                continue
            keep = _kept(db, evidence, month.month, _days(clocks, field), now)
            if keep is not None and evidence_partitions.drop(db, month.month, tables, now, keep):
                moved = f" ({len(keep)} intents' kept)" if keep else ""
                dropped.append(f"{month.month}: {', '.join(tables)}{moved}")
    return dropped


def overdue_kept(
    months: list[EvidenceMonth], column: str, days: int, now: datetime
) -> list[IdRange]:
    """The months whose evidence of one clock (`column` names its drop mark)
    retention takes row by row: overdue for `days` and still kept whole."""
    return [
        IdRange(m.month.lower_id, m.month.upper_id)
        for m in months
        if getattr(m, column) is None and overdue(m.month, days, now)
    ]


def _days(clocks: Clocks, field: str) -> list[dict[str, Any]]:
    return [
        {"tenant_id": tenant, "policy_version": version, "days": getattr(clock, field)}
        for (tenant, version), clock in clocks.items()
    ] + [{"tenant_id": None, "policy_version": None, "days": getattr(NO_POLICY, field)}]


def _kept(
    db: Database,
    evidence: retention.Evidence,
    month: Month,
    days: list[dict[str, Any]],
    now: datetime,
) -> list[UUID] | None:
    """The intents of `month` whose evidence under the clocks `days` must
    stay, when the month may go without them; None when it may not: some
    clock has not run out for the month yet, or too many intents remain."""
    clocks = [d["days"] for d in days]
    if not overdue(month, min(clocks), now):
        return None  # not even the shortest clock has run out for the month
    params = {
        "clocks": Jsonb(days),
        "low": month.lower_id,
        "high": month.upper_id,
        "now": now,
        "default_days": days[-1]["days"],
        "longest_days": max(clocks),
        "most": MOST_KEPT + 1,
    }
    with db.transaction() as conn:
        keep = sorted({row["id"] for row in retention.kept_in_month(conn, evidence, params)})
    if not keep:
        return keep
    # Kept apart only once every clock has run out for the month: before,
    # what it still needs is not a few late intents but a policy's clock.
    if not overdue(month, max(clocks), now) or len(keep) > MOST_KEPT:
        return None
    return keep
