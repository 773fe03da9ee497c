"""Alerts: evaluated by the sweeper from rows, stored, announced by webhook.

The lesson of R002.1 (docs/requirements.md): "worker completed" says code ran, not that anyone got
the report. So the conditions here are about the ledger, never about a
batch finishing:

* ``unreconciled:<event_class>:<channel>``: intents sent (or being sent)
  with no terminal evidence, the oldest past the delivery objective of its
  event class and channel;
* ``due_backlog:<channel>``: intents due but not claimed, the oldest due
  for too long (workers down, a channel starved, a kill switch left on);
* ``urgent_backlog:<channel>``: single intents (of no job) due but not
  claimed, the oldest due past ``TIDINGS_ALERT_URGENT_WARN_SECONDS``
  (30 s; pages at ``_PAGE_SECONDS``, 120 s). The claim takes them before
  any job's (docs/concepts/lanes.md), so this is workers missing or held;
* ``impossible_transitions``: the audit holds a move the transition table
  forbids. The state machine is broken, so this pages at once;
* ``quarantined``: a worker quarantined intents of the tenant it could not
  decode or render (dispatch/quarantine.py) within the quarantine window.
  A warning: the rest went on, but someone wrote around the checks.
* ``retrying:<channel>`` (condition ``provider_retrying``): unsent intents
  retried after retryable provider failures (429, 5xx, a misconfigured
  adapter, a report that cannot be loaded) at least
  ``TIDINGS_ALERT_RETRY_WARN_FAILURES`` times; each ends ``failed`` at its
  policy's ``retry.max_failures`` (retries.py). A warning;
* ``pending_too_long:<channel>``: unsent intents older than their policy's
  ``retry.max_pending_seconds``. A warning;
* ``delivery_unknown:<event_class>:<channel>`` (condition
  ``report_delivery_unknown``, R002.1): outcomes that stayed unknown within
  the unknown window: a call started and nothing the provider offers told
  what became of it. Never resent blind, so a person must decide; a page
  from the affected volume up, a warning below it. Such intents also keep
  the unreconciled alert open for the window: giving up clears nothing.
* ``request_anomaly:<event_class>:<country|prefix>:<value>``: requests of a
  user-triggered class to a country or number prefix in the last hour,
  refused ones included, jumped against that country's or prefix's own
  baseline (SMS pumping; requests.py). A page from
  ``TIDINGS_ALERT_REQUEST_PAGE_REQUESTS`` up, a warning below it.
* ``provider_refused:<channel>:<account>:<code>``: a provider refused our
  request (``REQUEST_INVALID``), our sender (``SENDER_REJECTED``) or our
  account (``ACCOUNT_RESTRICTED``) within
  ``TIDINGS_ALERT_REFUSAL_WINDOW_SECONDS`` (refusals.py). The last two page
  (every send fails alike); an invalid request warns, and pages from
  ``TIDINGS_ALERT_REFUSAL_PAGE_REQUESTS`` refusals in the window up.
* ``canary_failed:<account>``: the newest synthetic canary through a
  provider account (dispatch/canary.py) failed; it carries the provider's
  answer and clears when a round through the account succeeds
  (canaries.py). Told to every tenant: the accounts are shared. A page.

A warning needs age only, so someone can look before the objective is
spent. A page needs age AND affected volume: a single slow receipt that
the next poll closes must not wake anyone (R002.8, "the on-call cost of
a polling threshold"). Every alert names what the page must say: event
class, job and report ids, template revision, channel, affected recipient
count, oldest nonterminal age, last successful reconciliation and the
action available. An alert resolves itself when its condition clears;
openings, escalations to page and resolutions are POSTed, signed, to
``TIDINGS_ALERT_WEBHOOK_URL``, durably (a failed POST is retried later).

    sweeper = AlertSweeper(runtime)          # thresholds from TIDINGS_ALERT_*
    sweeper.tick(runtime.clock.now())        # in the worker's maintenance loop

The objectives are in `config.py`, the conditions in `rules.py`,
the webhook in `webhook.py`; here, storing and the sweeper's round.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime

import psycopg

from tidings.domain.ids import uuid7
from tidings.observability.alerts.canaries import evaluate_canaries
from tidings.observability.alerts.config import AlertConfig
from tidings.observability.alerts.refusals import evaluate_refusals
from tidings.observability.alerts.requests import evaluate_requests
from tidings.observability.alerts.retries import evaluate_retries
from tidings.observability.alerts.rules import Alert, Conn, evaluate
from tidings.observability.alerts.webhook import AlertWebhook, deliver_pending
from tidings.observability.metrics import SCRAPE_TIMEOUT_MS
from tidings.runtime import Runtime
from tidings.store import alerts as stored
from tidings.store import metrics_reads
from tidings.store.database import Database, Row

log = logging.getLogger("tidings.alerts")

# Any fixed 64-bit number; only one worker evaluates per round.
ALERTS_LOCK = 0x74696469_616C7274
ROUND_SCOPE = "alerts"  # the periodic evaluation's row in alert_rounds
# A shared round starts no sooner than this many times the last one took:
# evaluating takes at most a twentieth of the time, however long the scans.
ROUND_SPACING = 20.0


EVALUATORS = (evaluate, evaluate_retries, evaluate_requests, evaluate_refusals, evaluate_canaries)


@dataclass
class Evaluation:
    alerts: list[Alert] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # evaluators past the timeout


def evaluate_each(conn: Conn, now: datetime, config: AlertConfig) -> Evaluation:
    """Every condition, each evaluator in a savepoint of its own: one whose
    scan runs past the statement timeout (a backlog far larger than the
    scans were shaped for) costs the round its own alerts, not the others':
    one shared failure left the round with no alert at all, at the moment
    the backlog alerts mattered most."""
    metrics_reads.limit_statement_time(conn, SCRAPE_TIMEOUT_MS)
    found = Evaluation()
    for evaluator in EVALUATORS:
        try:
            with conn.transaction():
                found.alerts += evaluator(conn, now, config)
        except psycopg.errors.QueryCanceled:
            found.failed.append(evaluator.__name__)
    return found


@dataclass
class AlertChanges:
    opened: list[Row] = field(default_factory=list)
    updated: list[Row] = field(default_factory=list)
    resolved: list[Row] = field(default_factory=list)


def sync_alerts(
    db: Database,
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
        with db.transaction() as conn:
            if not stored.try_lock(conn, ALERTS_LOCK):
                return None
            if every is not None and not stored.claim_round(
                conn, ROUND_SCOPE, now, every, ROUND_SPACING
            ):
                return None
            found = evaluate_each(conn, now, config or AlertConfig.from_env())
            if found.failed:
                log.warning(
                    "alert round: %s ran past the statement timeout; their alerts are left "
                    "as they were, and nothing is resolved this round",
                    ", ".join(found.failed),
                )
            # A condition not evaluated is not a condition cleared.
            changes = store(conn, found.alerts, now, resolve=not found.failed)
            if every is not None:
                took = time.monotonic() - started
                stored.record_round_cost(conn, ROUND_SCOPE, took)
            return changes
    except psycopg.errors.QueryCanceled:
        # The scans ran past their timeout: count the round and its cost, or
        # every worker would start it again each interval and fail again.
        if every is not None:
            took = time.monotonic() - started
            with db.transaction() as conn:
                stored.record_failed_round(conn, ROUND_SCOPE, now, every, took)
        raise


def store(conn: Conn, alerts: list[Alert], now: datetime, *, resolve: bool = True) -> AlertChanges:
    """Make the open alerts match `alerts`: open new ones, resolve cleared
    ones (unless not `resolve`: some condition was not evaluated)."""
    changes = AlertChanges()
    open_rows = {(r["tenant_id"], r["key"]): r for r in stored.open_alerts(conn)}
    for alert in alerts:
        existing = open_rows.pop((alert.tenant_id, alert.key), None)
        if existing is None:
            opened = stored.open_alert(
                conn,
                tenant_id=alert.tenant_id,
                alert_id=uuid7(now),
                key=alert.key,
                condition=alert.condition,
                severity=alert.severity,
                summary=alert.summary,
                details=alert.details,
                now=now,
            )
            if opened is not None:
                changes.opened.append(opened)
        else:
            updated = stored.update_alert(
                conn,
                tenant_id=alert.tenant_id,
                alert_id=existing["id"],
                severity=alert.severity,
                summary=alert.summary,
                details=alert.details,
                now=now,
            )
            if updated is not None:
                changes.updated.append(updated)
    for stale in open_rows.values() if resolve else ():
        resolved = stored.resolve_alert(conn, stale["tenant_id"], stale["id"], now)
        if resolved is not None:
            changes.resolved.append(resolved)
    return changes


@dataclass(frozen=True)
class AlertRound:
    changes: AlertChanges | None
    delivered: int


class AlertSweeper:
    """Evaluates at most every `interval_seconds`, then announces what is owed."""

    def __init__(
        self,
        runtime: Runtime,
        config: AlertConfig | None = None,
        webhook: AlertWebhook | None = None,
    ) -> None:
        self.runtime = runtime
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
        changes = sync_alerts(self.runtime.db, now, self.config, every=every)
        for row in changes.opened if changes else ():
            log.warning("alert opened: %s %s", row["severity"], row["summary"])
        for row in changes.resolved if changes else ():
            log.info("alert resolved: %s", row["key"])
        delivered = 0
        if self.webhook is not None:
            delivered = deliver_pending(
                self.runtime.db,
                self.webhook,
                now,
                budget_seconds=self.config.delivery_budget_seconds,
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
