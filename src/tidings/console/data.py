"""What each console page shows, read from rows of one tenant.

Nothing here renders HTML, and nothing returns a destination, a token, a
link, variables or a rendered body: only states, codes, times, ids and
counts, plus audit details passed through redaction.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg

from tidings.domain.errors import PolicyUnreadable
from tidings.domain.intent import Intent, TimelineEntry
from tidings.domain.job_status import derived_status
from tidings.domain.redaction import redact_value
from tidings.domain.spend_breakers import SpendBreaker, breaker_keys, breakers
from tidings.domain.state_words import state_note
from tidings.domain.states import TERMINAL_INTENT
from tidings.store import (
    canaries,
    console_reads,
    controls,
    job_counts,
    ledger,
    policies,
    transition_audit,
)
from tidings.store.database import Row

Conn = psycopg.Connection[Any]

# Bottom to top in the chart: settled outcomes first, work in flight on top.
STATE_ORDER: tuple[str, ...] = (
    "delivered",
    "failed",
    "unknown",
    "expired",
    "canceled",
    "suppressed",
    "no_permitted_channel",
    "accepted",
    "reconciling",
    "sending",
    "resend_due",
    "pending",
)
TERMINAL = frozenset(s.value for s in TERMINAL_INTENT)
CHART_MINUTES = 60


@dataclass
class Overview:
    now: datetime
    counts: dict[str, int]
    codes: list[Row]
    due: list[Row]
    unreconciled: list[Row]
    last_reconciliation: dict[str, datetime]
    alerts: list[Row]
    controls: list[Row]
    oldest: list[Row]
    series: Series
    spend: list[SpendBreaker] = field(default_factory=list)
    # The provider accounts' newest synthetic canaries (dispatch/canary.py):
    # deployment-wide, never counted with this tenant's intents.
    canaries: list[Row] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def in_flight(self) -> int:
        return sum(n for s, n in self.counts.items() if s not in TERMINAL)

    @property
    def oldest_due_age(self) -> float | None:
        return _oldest_age(self.now, [r["oldest"] for r in self.due])

    @property
    def oldest_unreconciled_age(self) -> float | None:
        return _oldest_age(self.now, [r["oldest"] for r in self.unreconciled])

    @property
    def last_reconciled_at(self) -> datetime | None:
        return max(self.last_reconciliation.values(), default=None)

    @property
    def kill_switch(self) -> list[Row]:
        return [c for c in self.controls if c["kind"] == "kill_switch" and c["enabled"]]

    @property
    def shadow_mode(self) -> list[Row]:
        return [c for c in self.controls if c["kind"] == "shadow_mode" and c["enabled"]]

    @property
    def open_alerts(self) -> list[Row]:
        return [a for a in self.alerts if a["resolved_at"] is None]

    @property
    def resolved_alerts(self) -> list[Row]:
        return [a for a in self.alerts if a["resolved_at"] is not None]

    def age(self, then: datetime | None) -> float | None:
        return None if then is None else max(0.0, (self.now - then).total_seconds())


def _oldest_age(now: datetime, times: list[datetime]) -> float | None:
    return max(0.0, (now - min(times)).total_seconds()) if times else None


@dataclass
class Series:
    """Intents per state at the end of each minute of the last hour."""

    minutes: list[datetime]
    values: dict[str, list[int]] = field(default_factory=dict)


def overview(conn: Conn, tenant: str, now: datetime) -> Overview:
    console_reads.without_jit(conn)
    counts = console_reads.state_counts(conn, tenant)
    return Overview(
        now=now,
        counts=counts,
        codes=console_reads.codes(conn, tenant),
        due=console_reads.due(conn, tenant, now),
        unreconciled=console_reads.unreconciled(conn, tenant),
        last_reconciliation=console_reads.last_reconciliation(conn, tenant),
        alerts=console_reads.alerts(conn, tenant, since=now - timedelta(days=1)),
        controls=controls.controls_of(conn, tenant),
        oldest=console_reads.oldest(conn, tenant, limit=10),
        series=state_series(conn, tenant, now, counts),
        spend=spend_breakers(conn, tenant, now),
        canaries=canaries.latest(conn),
    )


def spend_breakers(conn: Conn, tenant: str, now: datetime) -> list[SpendBreaker]:
    """The current policy's per-country spend breakers in their windows;
    none when no policy (or no readable one) is published."""
    try:
        policy = policies.current(conn, tenant)
    except PolicyUnreadable:  # the alerts say so; the page still shows the rest
        return []
    if policy is None:
        return []
    windows = [(key.key, key.window_start(now)) for _, _, key in breaker_keys(policy)]
    used = console_reads.spend_used(conn, tenant, windows) if windows else {}
    return breakers(policy, now, used)


def state_series(conn: Conn, tenant: str, now: datetime, current: dict[str, int]) -> Series:
    """Walk today's counts back through the last hour's transitions.

    Cheaper than replaying history forwards: only the last hour's
    transitions per minute are read, as the folds keep them, and the
    current counts anchor the walk exactly.
    """
    end = now.replace(second=0, microsecond=0)
    minutes = [end - timedelta(minutes=CHART_MINUTES - 1 - k) for k in range(CHART_MINUTES)]
    deltas: dict[datetime, Counter[str]] = {}
    changes = transition_audit.changes_since(conn, tenant, minutes[0])
    if changes is None:  # the folds are far behind: recount the hour
        changes = console_reads.state_changes(conn, tenant, since=minutes[0])
    for row in changes:
        delta = deltas.setdefault(row["minute"], Counter())
        delta[row["to_state"]] += row["n"]
        if row["from_state"] is not None:
            delta[row["from_state"]] -= row["n"]
    running: Counter[str] = Counter(current)
    for minute, delta in deltas.items():
        if minute > end:  # written by a clock ahead of ours: not yet, from here
            running.subtract(delta)
    snapshots: list[dict[str, int]] = []
    for minute in reversed(minutes):
        snapshots.append(dict(running))
        running.subtract(deltas.get(minute, Counter()))
    snapshots.reverse()
    values = {s: [max(0, snap.get(s, 0)) for snap in snapshots] for s in STATE_ORDER}
    return Series(minutes, {s: v for s, v in values.items() if any(v)})


@dataclass
class JobRow:
    id: str
    event_class: str
    status: str
    created_at: str | None
    audience: int | None
    report: str | None
    template: str | None
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def settled(self) -> int:
        return sum(n for s, n in self.counts.items() if s in TERMINAL)


@dataclass
class Jobs:
    table_present: bool
    jobs: list[JobRow]
    classes: list[dict[str, Any]]


def jobs(conn: Conn, tenant: str) -> Jobs:
    """Jobs with progress when the jobs table exists; event classes always."""
    present = console_reads.jobs_table_present(conn)
    found: list[JobRow] = []
    if present:
        raw = console_reads.recent_jobs(conn, tenant, limit=50)
        ids = [UUID(j["id"]) for j in raw]
        counts: dict[str, dict[str, int]] = {}
        # Kept counts (store/job_counts.py), and the status the API derives
        # from them (domain/job_status.py): never the stored one alone.
        for row in job_counts.states_of_jobs(conn, tenant, ids):
            counts.setdefault(str(row["job_id"]), {})[row["state"]] = row["n"]
        found = [_job(j, counts.get(str(j["id"]), {})) for j in raw]
    return Jobs(present, found, _classes(console_reads.event_classes(conn, tenant)))


def _job(job: dict[str, Any], counts: dict[str, int]) -> JobRow:
    # Read through .get: the jobs table is younger than the console and may grow.
    report = job.get("report_id")
    revisions = job.get("template_revisions")
    template = job.get("template_name")
    if template and isinstance(revisions, dict) and revisions:
        template += " rev " + ", ".join(f"{k}:{v}" for k, v in sorted(revisions.items()))
    return JobRow(
        id=str(job["id"]),
        event_class=str(job.get("event_class", "")),
        status=derived_status(str(job.get("status", "")), counts),
        created_at=job.get("created_at"),
        audience=job.get("audience_size"),
        report=f"{report} rev {job.get('report_revision')}" if report else None,
        template=template,
        counts=counts,
    )


def _classes(rows: list[Row]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        group = groups.setdefault(
            (row["event_class"], row["channel"]),
            {"event_class": row["event_class"], "channel": row["channel"], "counts": {}},
        )
        group["counts"][row["state"]] = row["n"]
        group["last_at"] = max(group.get("last_at", row["last_at"]), row["last_at"])
    for group in groups.values():
        group["total"] = sum(group["counts"].values())
        group["settled"] = sum(n for s, n in group["counts"].items() if s in TERMINAL)
    return sorted(groups.values(), key=lambda g: g["last_at"], reverse=True)


@dataclass
class IntentPage:
    intent: Intent
    canceled_at: datetime | None
    canceled_by: str | None
    last_observation: Row | None
    timeline: list[TimelineEntry]

    @property
    def state_note(self) -> str | None:
        return state_note(self.intent)

    @property
    def accepted(self) -> tuple[datetime | None, int | None]:
        """When a provider took it, and by which attempt. A cancel can win the
        race with the send: the intent then never records the acceptance,
        but its attempt does, and an operator must see that fact."""
        if self.intent.accepted_at is not None:
            return self.intent.accepted_at, None
        taken = [a for a in self.intent.attempts if a.accepted_at is not None]
        if not taken:
            return None, None
        first = min(taken, key=lambda a: a.accepted_at or datetime.max)
        return first.accepted_at, first.n


def intent_page(conn: Conn, tenant: str, intent_id: UUID) -> IntentPage | None:
    intent = ledger.get_intent(conn, tenant, intent_id, with_attempts=True)
    if intent is None:
        return None
    cancel = console_reads.cancellation(conn, tenant, intent_id)
    return IntentPage(
        intent=intent,
        canceled_at=cancel["at"] if cancel else None,
        canceled_by=cancel["actor"] if cancel else None,
        last_observation=console_reads.last_observation(conn, tenant, intent_id),
        timeline=ledger.timeline(conn, tenant, intent_id),
    )


def safe_detail(detail: Any) -> list[tuple[str, str]]:
    """Audit detail as flat `key: value` pairs an operator may see.

    Redaction drops sensitive keys (variables, body, link, token, to ...)
    and masks addresses and numbers in text; anything that still looks like
    a URL is withheld too, since a link may carry a token.
    """
    pairs: list[tuple[str, str]] = []
    _flatten("", redact_value(detail), pairs)
    return [(k, "<link withheld>" if "://" in v else v) for k, v in pairs]


def _flatten(prefix: str, value: Any, out: list[tuple[str, str]]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), inner, out)
    elif value is not None and value != [] and value != {}:
        out.append((prefix or "value", str(value)))
