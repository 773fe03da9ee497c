"""When an alert warns and when it pages: objectives from TIDINGS_ALERT_*.

config = AlertConfig.from_env()
config.objective_for("report_ready", "email").severity(age, recipients)
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Literal

Severity = Literal["warning", "page"]

# The unreconciled alert counts distinct recipients among the oldest this
# many intents in flight (and as many given up): a bounded read however
# large the backlog (issue 38, item 4). Far above any page threshold.
RECIPIENTS_CAP = 10_000


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
    # Single intents (a reset, an offer) are claimed before any job's: one
    # due this long means workers are missing, held or swamped by singles.
    urgent: Objective = Objective(30.0, 120.0, 1)
    interval_seconds: float = 30.0
    webhook_url: str | None = None
    webhook_secret: str | None = None
    webhook_timeout_seconds: float = 5.0
    webhook_attempts: int = 3
    # How long the `quarantined` warning holds after the last quarantine.
    quarantine_window_seconds: float = 86400.0
    # How long an outcome that stayed unknown keeps `report_delivery_unknown`
    # and the unreconciled alert open: giving up clears neither.
    unknown_window_seconds: float = 86400.0
    # A round of deliveries runs in the worker's maintenance loop, next to
    # lease heartbeats; it stops well inside the default 30 s lease.
    delivery_budget_seconds: float = 10.0
    # An unsent intent retried this many times after retryable provider
    # failures opens `provider_retrying` (it ends at retry.max_failures).
    retry_warn_failures: int = 3
    # `request_anomaly` (SMS pumping, observability/alerts/requests.py): a
    # country's or prefix's requests of a user-triggered class in the last
    # hour, at least `request_floor` of them and `request_factor` times its
    # baseline per hour; a page from `request_page_requests` up.
    request_floor: int = 30
    request_factor: float = 5.0
    request_page_requests: int = 300
    # `provider_refused` (refusals.py): refusals of our request, sender or
    # account within this window hold it open. SENDER_REJECTED and
    # ACCOUNT_RESTRICTED page at once (every send fails alike); a
    # REQUEST_INVALID may be one template's or one caller's, so it warns,
    # and pages from `refusal_page_requests` in the window up.
    refusal_window_seconds: float = 3600.0
    refusal_page_requests: int = 10

    def recipients_cap(self) -> int:
        """Where the unreconciled scan stops counting distinct recipients
        (store/alert_scans.py): RECIPIENTS_CAP, or the largest page threshold
        when one is larger, so a count at the cap still reaches every
        threshold and the rule still pages past it."""
        thresholds = [o.page_recipients for o in (self.unreconciled, *self.objectives.values())]
        return max(RECIPIENTS_CAP, *thresholds)

    def due_cap(self) -> int:
        """Where the due scan stops reading each tenant's channel
        (alert_scans.sql, alert_due): RECIPIENTS_CAP, or the due page
        threshold when it is larger, so the rule still pages past it."""
        return max(RECIPIENTS_CAP, self.due.page_recipients)

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
            urgent=Objective(
                num("URGENT_WARN_SECONDS", base.urgent.warn_seconds),
                num("URGENT_PAGE_SECONDS", base.urgent.page_seconds),
                int(num("URGENT_PAGE_RECIPIENTS", base.urgent.page_recipients)),
            ),
            interval_seconds=num("INTERVAL_SECONDS", base.interval_seconds),
            quarantine_window_seconds=num(
                "QUARANTINE_WINDOW_SECONDS", base.quarantine_window_seconds
            ),
            unknown_window_seconds=num("UNKNOWN_WINDOW_SECONDS", base.unknown_window_seconds),
            webhook_url=e.get("TIDINGS_ALERT_WEBHOOK_URL") or None,
            webhook_secret=e.get("TIDINGS_ALERT_WEBHOOK_SECRET") or None,
            webhook_timeout_seconds=num("WEBHOOK_TIMEOUT_SECONDS", base.webhook_timeout_seconds),
            webhook_attempts=int(num("WEBHOOK_ATTEMPTS", base.webhook_attempts)),
            retry_warn_failures=int(num("RETRY_WARN_FAILURES", base.retry_warn_failures)),
            request_floor=int(num("REQUEST_FLOOR", base.request_floor)),
            request_factor=num("REQUEST_FACTOR", base.request_factor),
            request_page_requests=int(num("REQUEST_PAGE_REQUESTS", base.request_page_requests)),
            refusal_window_seconds=num("REFUSAL_WINDOW_SECONDS", base.refusal_window_seconds),
            refusal_page_requests=int(num("REFUSAL_PAGE_REQUESTS", base.refusal_page_requests)),
        )


def _objectives(text: str, default: Objective) -> dict[str, Objective]:
    """`{"report_ready:email": {"warn_seconds": 900, ...}}`; missing fields default."""
    if not text.strip():
        return {}
    parsed = json.loads(text)
    return {scope: Objective(**{**asdict(default), **values}) for scope, values in parsed.items()}
