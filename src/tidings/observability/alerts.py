"""Alerts: evaluated by the sweeper from rows, stored, announced by webhook.

Seed 002's lesson: "worker completed" says code ran, not that anyone got
the report. So the conditions here are about the ledger, never about a
batch finishing:

* ``unreconciled:<event_class>:<channel>``: intents sent (or being sent)
  with no terminal evidence, the oldest past the delivery objective of its
  event class and channel;
* ``due_backlog:<channel>``: intents due but not claimed, the oldest due
  for too long (workers down, a channel starved, a kill switch left on);
* ``impossible_transitions``: the audit holds a move the transition table
  forbids. The state machine is broken, so this pages at once;
* ``quarantined``: a worker quarantined intents of the tenant it could not
  decode or render (dispatch/quarantine.py) within the quarantine window.
  A warning: the rest went on, but someone wrote around the checks.

A warning needs age only, so someone can look before the objective is
spent. A page needs age AND affected volume: a single slow receipt that
the next poll closes must not wake anyone (seed 002, "the on-call cost of
a polling threshold"). Every alert names what the page must say: event
class, job and report ids, template revision, channel, affected recipient
count, oldest nonterminal age, last successful reconciliation and the
action available. An alert resolves itself when its condition clears;
openings, escalations to page and resolutions are POSTed, signed, to
``TIDINGS_ALERT_WEBHOOK_URL``, durably (a failed POST is retried later).

    sweeper = AlertSweeper(tidings)          # thresholds from TIDINGS_ALERT_*
    sweeper.tick(tidings.clock.now())        # in the worker's maintenance loop
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import psycopg

from tidings.client import Tidings
from tidings.domain.ids import uuid7
from tidings.observability.alert_webhook import AlertWebhook, deliver_pending, jsonable
from tidings.observability.metrics import SCRAPE_TIMEOUT_MS, allowed_transitions
from tidings.store.database import Row, execute, fetch_all, fetch_one

log = logging.getLogger("tidings.alerts")
Conn = psycopg.Connection[Any]
Severity = Literal["warning", "page"]

# Any fixed 64-bit number; only one worker evaluates per round.
ALERTS_LOCK = 0x74696469_616C7274
ROUND_SCOPE = "alerts"  # the periodic evaluation's row in alert_rounds
# A shared round starts no sooner than this many times the last one took:
# evaluating takes at most a twentieth of the time, however long the scans.
ROUND_SPACING = 20.0
KILL_SWITCH = "PUT /v1/controls/kill-switch"


@dataclass(frozen=True)
class Objective:
    """When a condition warns, and when it pages (age AND volume)."""

    warn_seconds: float
    page_seconds: float
    page_recipients: int

    def severity(self, age: float, recipients: int) -> Severity | None:
        if age >= self.page_seconds and recipients >= self.page_recipients:
            return "page"
        if age >= self.warn_seconds:
            return "warning"
        return None


@dataclass(frozen=True)
class AlertConfig:
    # Defaults assume a 30-minute delivery objective and the default policy's
    # polling (first check after 5 s, backing off to every 5 min): a warning
    # at 10 min leaves two thirds of the objective to act in.
    unreconciled: Objective = Objective(600.0, 1800.0, 10)
    # Per "event_class:channel" or "event_class": each class has its own SLO.
    objectives: Mapping[str, Objective] = field(default_factory=dict)
    due: Objective = Objective(300.0, 900.0, 100)
    interval_seconds: float = 30.0
    webhook_url: str | None = None
    webhook_secret: str | None = None
    webhook_timeout_seconds: float = 5.0
    webhook_attempts: int = 3
    # How long the `quarantined` warning holds after the last quarantine.
    quarantine_window_seconds: float = 86400.0
    # A round of deliveries runs in the worker's maintenance loop, next to
    # lease heartbeats; it stops well inside the default 30 s lease.
    delivery_budget_seconds: float = 10.0

    def objective_for(self, event_class: str, channel: str) -> Objective:
        return (
            self.objectives.get(f"{event_class}:{channel}")
            or self.objectives.get(event_class)
            or self.unreconciled
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AlertConfig:
        e = os.environ if env is None else env
        base = cls()

        def num(name: str, default: float) -> float:
            return float(e.get(f"TIDINGS_ALERT_{name}", default))

        unreconciled = Objective(
            num("UNRECONCILED_WARN_SECONDS", base.unreconciled.warn_seconds),
            num("UNRECONCILED_PAGE_SECONDS", base.unreconciled.page_seconds),
            int(num("UNRECONCILED_PAGE_RECIPIENTS", base.unreconciled.page_recipients)),
        )
        return cls(
            unreconciled=unreconciled,
            objectives=_objectives(e.get("TIDINGS_ALERT_OBJECTIVES", ""), unreconciled),
            due=Objective(
                num("DUE_WARN_SECONDS", base.due.warn_seconds),
                num("DUE_PAGE_SECONDS", base.due.page_seconds),
                int(num("DUE_PAGE_RECIPIENTS", base.due.page_recipients)),
            ),
            interval_seconds=num("INTERVAL_SECONDS", base.interval_seconds),
            quarantine_window_seconds=num(
                "QUARANTINE_WINDOW_SECONDS", base.quarantine_window_seconds
            ),
            webhook_url=e.get("TIDINGS_ALERT_WEBHOOK_URL") or None,
            webhook_secret=e.get("TIDINGS_ALERT_WEBHOOK_SECRET") or None,
            webhook_timeout_seconds=num("WEBHOOK_TIMEOUT_SECONDS", base.webhook_timeout_seconds),
            webhook_attempts=int(num("WEBHOOK_ATTEMPTS", base.webhook_attempts)),
        )


def _objectives(text: str, default: Objective) -> dict[str, Objective]:
    """`{"report_ready:email": {"warn_seconds": 900, ...}}`; missing fields default."""
    if not text.strip():
        return {}
    parsed = json.loads(text)
    return {scope: Objective(**{**asdict(default), **values}) for scope, values in parsed.items()}


@dataclass(frozen=True)
class Alert:
    tenant_id: str
    key: str
    condition: str
    severity: Severity
    summary: str
    details: dict[str, Any]


# --- evaluation: conditions from rows --------------------------------------


def evaluate_alerts(
    tidings: Tidings, now: datetime, config: AlertConfig | None = None
) -> list[Alert]:
    """Every condition that holds now, across all tenants (nothing is stored)."""
    with tidings.db.transaction() as conn:
        return evaluate(conn, now, config or AlertConfig.from_env())


def evaluate(conn: Conn, now: datetime, config: AlertConfig) -> list[Alert]:
    fetch_one(conn, "metrics_statement_timeout", {"ms": str(SCRAPE_TIMEOUT_MS)})
    last = {
        (r["tenant_id"], r["channel"]): r["at"]
        for r in fetch_all(conn, "metrics_last_reconciliation", {})
    }
    return [
        *_unreconciled(fetch_all(conn, "alert_unreconciled", {}), last, now, config),
        *_due(fetch_all(conn, "alert_due", {"now": now}), last, now, config),
        *_impossible(fetch_all(conn, "alert_impossible_transitions", allowed_transitions())),
        *_quarantined(
            fetch_all(
                conn,
                "alert_quarantined",
                {"since": now - timedelta(seconds=config.quarantine_window_seconds)},
            )
        ),
    ]


def _unreconciled(
    rows: list[Row], last: Mapping[tuple[str, str], datetime], now: datetime, config: AlertConfig
) -> Iterator[Alert]:
    for row in rows:
        objective = config.objective_for(row["event_class"], row["channel"])
        age = _seconds(now, row["oldest_at"])
        severity = objective.severity(age, row["recipients"])
        if severity is None:
            continue
        reconciled = last.get((row["tenant_id"], row["channel"]))
        providers = ", ".join(row["providers"] or []) or "the provider"
        action = (
            f"Check {providers}'s status page; run `tidings timeline {row['oldest_id']}`; "
            "check that workers are polling (tidings_poll_lag_seconds); "
            f"the kill switch is {KILL_SWITCH} (reconciliation continues under it)."
        )
        scope = f"{row['event_class']}/{row['channel']}"
        warn, page = duration_text(objective.warn_seconds), duration_text(objective.page_seconds)
        summary = (
            f"{scope}: {row['recipients']} recipient(s) without delivery evidence, oldest "
            f"{duration_text(age)} (warn {warn}, page {page} with "
            f"{objective.page_recipients}+ recipients); "
            f"last successful reconciliation {_ago(now, reconciled)}"
        )
        yield Alert(
            row["tenant_id"],
            f"unreconciled:{row['event_class']}:{row['channel']}",
            "unreconciled_backlog",
            severity,
            summary,
            _details(row, now, reconciled, age, objective, action, row["event_class"]),
        )


def _due(
    rows: list[Row], last: Mapping[tuple[str, str], datetime], now: datetime, config: AlertConfig
) -> Iterator[Alert]:
    for row in rows:
        age = _seconds(now, row["oldest_due_at"])
        severity = config.due.severity(age, row["recipients"])
        if severity is None:
            continue
        if row["kill_switch"]:
            action = (
                f"The kill switch covers {row['channel']}: these intents are held on purpose. "
                f'Lift it with {KILL_SWITCH} {{"enabled": false}} when sending is safe again.'
            )
        else:
            action = (
                f"Workers are not claiming {row['channel']}: check that `tidings worker` runs "
                "and its logs, tidings_ledger_up and tidings_rate_limit_waits_total; run "
                f"`tidings timeline {row['oldest_id']}`; the kill switch is {KILL_SWITCH}."
            )
        reconciled = last.get((row["tenant_id"], row["channel"]))
        summary = (
            f"{row['channel']}: {row['intents']} intent(s) due and unclaimed, oldest due for "
            f"{duration_text(age)}{' (kill switch on)' if row['kill_switch'] else ''}"
        )
        details = _details(
            row, now, reconciled, age, config.due, action, ", ".join(row["event_classes"])
        )
        details["oldest_due_age_seconds"] = round(age, 3)
        details["oldest_nonterminal_age_seconds"] = round(_seconds(now, row["oldest_at"]), 3)
        details["kill_switch"] = row["kill_switch"]
        yield Alert(
            row["tenant_id"],
            f"due_backlog:{row['channel']}",
            "due_backlog",
            severity,
            summary,
            details,
        )


def _impossible(rows: list[Row]) -> Iterator[Alert]:
    for row in rows:
        samples = [jsonable(s) for s in row["samples"]]
        first = samples[0]["intent_id"] if samples else "<intent id>"
        yield Alert(
            row["tenant_id"],
            "impossible_transitions",
            "impossible_transitions",
            "page",
            f"{row['n']} recorded transition(s) the state machine forbids",
            {
                "count": row["n"],
                "samples": samples,
                "action": (
                    f"Run `tidings timeline {first}` for each sample and compare with "
                    "docs/states.md; consider the kill switch "
                    f"({KILL_SWITCH}) until the cause is known."
                ),
            },
        )


def _quarantined(rows: list[Row]) -> Iterator[Alert]:
    for row in rows:
        samples = [jsonable(s) for s in row["samples"]]
        first = samples[0]["intent_id"] if samples else "<intent id>"
        yield Alert(
            row["tenant_id"],
            "quarantined",
            "quarantined",
            "warning",
            f"{row['n']} intent(s) quarantined: a worker could not decode or render them",
            {
                "count": row["n"],
                "latest_at": jsonable(row["latest_at"]),
                "samples": samples,
                "action": (
                    f"Run `tidings timeline {first}`: the audit row keeps the values it "
                    "could not read. They were written around the API's checks (a direct "
                    "database write, an old release); the other intents were sent."
                ),
            },
        )


def _details(
    row: Row,
    now: datetime,
    reconciled: datetime | None,
    age: float,
    objective: Objective,
    action: str,
    event_class: str,
) -> dict[str, Any]:
    return {
        "event_class": event_class,
        "channel": row["channel"],
        "job_ids": row["job_ids"] or [],
        "report_ids": row["report_ids"] or [],
        "template_revisions": row["templates"] or [],
        "affected_recipients": row["recipients"],
        "affected_intents": row["intents"],
        "oldest_nonterminal_age_seconds": round(age, 3),
        "oldest_intent_id": str(row["oldest_id"]),
        "last_successful_reconciliation_at": reconciled.isoformat() if reconciled else None,
        "last_successful_reconciliation_age_seconds": (
            round(_seconds(now, reconciled), 3) if reconciled else None
        ),
        "thresholds": asdict(objective),
        "action": action,
    }


# --- persistence: open, update, resolve ------------------------------------


@dataclass
class AlertChanges:
    opened: list[Row] = field(default_factory=list)
    updated: list[Row] = field(default_factory=list)
    resolved: list[Row] = field(default_factory=list)


def sync_alerts(
    tidings: Tidings,
    now: datetime,
    config: AlertConfig | None = None,
    *,
    every: float | None = None,
) -> AlertChanges | None:
    """Evaluate and store in one transaction; None when another worker is at
    it or, with `every` (seconds), when the workers' shared round is not due:
    any worker evaluated less than `every` ago, or less than ROUND_SPACING
    times as long ago as that evaluation took."""
    started = time.monotonic()
    try:
        with tidings.db.transaction() as conn:
            row = fetch_one(conn, "alerts_lock", {"lock": ALERTS_LOCK})
            if not (row and row["locked"]):
                return None
            if every is not None:
                params = {"scope": ROUND_SCOPE, "now": now, "every": every,
                          "spacing": ROUND_SPACING}  # fmt: skip
                if fetch_one(conn, "alert_round_claim", params) is None:
                    return None
            changes = store(conn, evaluate(conn, now, config or AlertConfig.from_env()), now)
            if every is not None:
                took = time.monotonic() - started
                execute(conn, "alert_round_cost", {"scope": ROUND_SCOPE, "took": took})
            return changes
    except psycopg.errors.QueryCanceled:
        # The scans ran past their timeout: count the round and its cost, or
        # every worker would start it again each interval and fail again.
        if every is not None:
            took = time.monotonic() - started
            params = {"scope": ROUND_SCOPE, "now": now, "every": every, "took": took}
            with tidings.db.transaction() as conn:
                execute(conn, "alert_round_failed", params)
        raise


def store(conn: Conn, alerts: list[Alert], now: datetime) -> AlertChanges:
    """Make the open alerts match `alerts`: open new ones, resolve cleared ones."""
    changes = AlertChanges()
    open_rows = {(r["tenant_id"], r["key"]): r for r in fetch_all(conn, "alerts_open_all", {})}
    for alert in alerts:
        params = {
            "tenant_id": alert.tenant_id,
            "key": alert.key,
            "condition": alert.condition,
            "severity": alert.severity,
            "summary": alert.summary,
            "details": alert.details,
            "now": now,
        }
        existing = open_rows.pop((alert.tenant_id, alert.key), None)
        if existing is None:
            opened = fetch_one(conn, "alert_open", {**params, "id": uuid7(now)})
            if opened is not None:
                changes.opened.append(opened)
        else:
            updated = fetch_one(conn, "alert_update", {**params, "id": existing["id"]})
            if updated is not None:
                changes.updated.append(updated)
    for stale in open_rows.values():
        resolved = fetch_one(
            conn, "alert_resolve", {"tenant_id": stale["tenant_id"], "id": stale["id"], "now": now}
        )
        if resolved is not None:
            changes.resolved.append(resolved)
    return changes


# --- announcement: signed webhook, bounded retries, durable ----------------


# --- the sweeper's entry point ----------------------------------------------


@dataclass(frozen=True)
class AlertRound:
    changes: AlertChanges | None
    delivered: int


class AlertSweeper:
    """Evaluates at most every `interval_seconds`, then announces what is owed."""

    def __init__(
        self,
        tidings: Tidings,
        config: AlertConfig | None = None,
        webhook: AlertWebhook | None = None,
    ) -> None:
        self.t = tidings
        self.config = config or AlertConfig.from_env()
        self.webhook = webhook or _webhook_from(self.config)
        self._last: datetime | None = None

    def tick(self, now: datetime) -> AlertRound | None:
        """The periodic round: at most once an interval here, and across all
        workers (a round another worker took evaluates nothing here)."""
        if self._last is not None and (
            0 <= (now - self._last).total_seconds() < self.config.interval_seconds
        ):
            return None  # (a clock set back starts a new round at once)
        self._last = now
        return self.run(now, shared=True)

    def run(self, now: datetime, *, shared: bool = False) -> AlertRound:
        every = self.config.interval_seconds if shared else None
        changes = sync_alerts(self.t, now, self.config, every=every)
        for row in changes.opened if changes else ():
            log.warning("alert opened: %s %s", row["severity"], row["summary"])
        for row in changes.resolved if changes else ():
            log.info("alert resolved: %s", row["key"])
        delivered = 0
        if self.webhook is not None:
            delivered = deliver_pending(
                self.t, self.webhook, now, budget_seconds=self.config.delivery_budget_seconds
            )
        return AlertRound(changes, delivered)


def _webhook_from(config: AlertConfig) -> AlertWebhook | None:
    if not config.webhook_url:
        return None
    return AlertWebhook(
        config.webhook_url,
        config.webhook_secret,
        timeout=config.webhook_timeout_seconds,
        attempts=config.webhook_attempts,
    )


# --- small helpers ------------------------------------------------------------


def _seconds(now: datetime, then: datetime | None) -> float:
    return 0.0 if then is None else max(0.0, (now - then).total_seconds())


def duration_text(seconds: float) -> str:
    """Seconds as an operator reads them: 45s, 11m 10s, 2h 5m."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s" if secs else f"{minutes}m"
    return f"{secs}s"


def _ago(now: datetime, then: datetime | None) -> str:
    if then is None:
        return "never"
    return f"{duration_text(_seconds(now, then))} ago ({then.isoformat()})"
