"""The alert conditions, evaluated from ledger rows (nothing is stored here).

Each condition is about the ledger, never about a batch finishing; see
`observability/alerts/__init__.py` for the list and what a page must say.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg

from tidings.observability.alerts.config import AlertConfig, Objective, Severity
from tidings.observability.alerts.webhook import jsonable
from tidings.observability.transition_rows import allowed_transitions
from tidings.store import alert_scans, lanes, metrics_reads, transition_audit
from tidings.store.database import Row

Conn = psycopg.Connection[Any]
KILL_SWITCH = "PUT /v1/controls/kill-switch"


@dataclass(frozen=True)
class Alert:
    tenant_id: str
    key: str
    condition: str
    severity: Severity
    summary: str
    details: dict[str, Any]


def evaluate(conn: Conn, now: datetime, config: AlertConfig) -> list[Alert]:
    reconciled = metrics_reads.last_reconciliation(conn)
    last = {(r["tenant_id"], r["channel"]): r["at"] for r in reconciled}
    unknown_since = now - timedelta(seconds=config.unknown_window_seconds)
    quarantine_since = now - timedelta(seconds=config.quarantine_window_seconds)
    allowed = allowed_transitions()
    transition_audit.fold(conn, allowed)
    return [
        *_unreconciled(
            alert_scans.unreconciled(conn, unknown_since, config.recipients_cap()),
            last,
            now,
            config,
        ),
        *_unknown(alert_scans.delivery_unknown(conn, unknown_since), last, now, config),
        *_due(alert_scans.due(conn, now, config.due_cap()), last, now, config),
        *_urgent(lanes.urgent_backlog(conn, now), now, config),
        *_impossible(alert_scans.impossible_transitions(conn, allowed)),
        *_quarantined(alert_scans.quarantined(conn, quarantine_since)),
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
        given_up = ""
        if row["unknown"]:
            more = "+" if row["unknown_more"] else ""
            given_up = f", {row['unknown']}{more} of them given up as unknown"
        # Past the cap the recipients are those of the oldest intents: at least.
        least = "at least " if row["recipients_more"] else ""
        summary = (
            f"{scope}: {least}{row['recipients']} recipient(s) without delivery evidence"
            f"{given_up}, "
            f"oldest {duration_text(age)} (warn {warn}, page {page} with "
            f"{objective.page_recipients}+ recipients); "
            f"last successful reconciliation {_ago(now, reconciled)}"
        )
        details = _details(row, now, reconciled, age, objective, action, row["event_class"])
        details["given_up_unknown"] = row["unknown"]
        # True when a count stopped at the cap: the number is "at least".
        details["given_up_unknown_more"] = row["unknown_more"]
        details["affected_recipients_more"] = row["recipients_more"]
        yield Alert(
            row["tenant_id"],
            f"unreconciled:{row['event_class']}:{row['channel']}",
            "unreconciled_backlog",
            severity,
            summary,
            details,
        )


def _unknown(
    rows: list[Row], last: Mapping[tuple[str, str], datetime], now: datetime, config: AlertConfig
) -> Iterator[Alert]:
    """Outcomes that stayed unknown: a call started and nothing the provider
    offers told what became of it. Never resent blind, so a person decides."""
    for row in rows:
        objective = config.objective_for(row["event_class"], row["channel"])
        severity: Severity = "page" if row["recipients"] >= objective.page_recipients else "warning"
        reconciled = last.get((row["tenant_id"], row["channel"]))
        providers = ", ".join(row["providers"] or []) or "the provider"
        action = (
            f"Do not resend blind: each of these may have been delivered. Search {providers}'s "
            f"own logs or dashboard for messages to these recipients around "
            f"{row['first_at'].isoformat()} to {row['latest_at'].isoformat()}; run "
            f"`tidings timeline {row['oldest_id']}` for what was tried. Where the provider "
            "shows no message, create a new intent (a new idempotency key) for that recipient."
        )
        scope = f"{row['event_class']}/{row['channel']}"
        summary = (
            f"{scope}: delivery unknown for {row['recipients']} recipient(s) via {providers}: "
            f"the call started and reconciliation gave up; last successful reconciliation "
            f"{_ago(now, reconciled)}"
        )
        age = _seconds(now, row["oldest_at"])
        details = _details(row, now, reconciled, age, objective, action, row["event_class"])
        details["first_unknown_at"] = row["first_at"].isoformat()
        details["latest_unknown_at"] = row["latest_at"].isoformat()
        details["providers"] = row["providers"] or []
        yield Alert(
            row["tenant_id"],
            f"delivery_unknown:{row['event_class']}:{row['channel']}",
            "report_delivery_unknown",
            severity,
            summary,
            details,
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
        # Past the cap the scan stopped counting: the oldest are all it read.
        count = f"at least {row['intents']:,}" if row["intents_more"] else row["intents"]
        summary = (
            f"{row['channel']}: {count} intent(s) due and unclaimed, oldest due for "
            f"{duration_text(age)}{' (kill switch on)' if row['kill_switch'] else ''}"
        )
        details = _details(
            row, now, reconciled, age, config.due, action, ", ".join(row["event_classes"])
        )
        details["oldest_due_age_seconds"] = round(age, 3)
        details["oldest_nonterminal_age_seconds"] = round(_seconds(now, row["oldest_at"]), 3)
        details["kill_switch"] = row["kill_switch"]
        details["held_intents"] = row["held_intents"]
        # True when the counts stopped at the cap: they are "at least".
        details["affected_intents_more"] = row["intents_more"]
        yield Alert(
            row["tenant_id"],
            f"due_backlog:{row['channel']}",
            "due_backlog",
            severity,
            summary,
            details,
        )


def _urgent(rows: list[Row], now: datetime, config: AlertConfig) -> Iterator[Alert]:
    for row in rows:
        age = _seconds(now, row["oldest_due_at"])
        severity = config.urgent.severity(age, row["intents"])
        # Every one held by a kill switch on purpose: due_backlog says so.
        if severity is None or row["kill_switch"]:
            continue
        yield Alert(
            row["tenant_id"],
            f"urgent_backlog:{row['channel']}",
            "urgent_backlog",
            severity,
            f"{row['channel']}: {row['intents']} single intent(s) due and unclaimed, "
            f"oldest due for {duration_text(age)}",
            {
                "channel": row["channel"],
                "event_classes": row["event_classes"] or [],
                "affected_intents": row["intents"],
                "oldest_due_age_seconds": round(age, 3),
                "thresholds": asdict(config.urgent),
                "action": (
                    f"Single intents are claimed before any job's, so workers are missing, "
                    f"held or busy with singles alone: check that `tidings worker` runs for "
                    f"{row['channel']} and its logs, tidings_lane_oldest_due_seconds, "
                    "tidings_claim_seconds and tidings_provider_paused_seconds."
                ),
            },
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
        intents = [s["intent_id"] for s in samples if "intent_id" in s]
        loops = sorted(
            {f"{s['loop']}: {s['subject']} ({s['code']})" for s in samples if "loop" in s}
        )
        first = intents[0] if intents else "<intent id>"
        yield Alert(
            row["tenant_id"],
            "quarantined",
            "quarantined",
            "warning",
            f"{row['n']} row(s) of tenant {row['tenant_id']} quarantined: a worker could not "
            "decode, render or apply them (its policy included); everyone else's went on",
            {
                "count": row["n"],
                "latest_at": jsonable(row["latest_at"]),
                "samples": samples,
                "set_aside": loops,
                "action": (
                    f"Run `tidings timeline {first}`: the audit row keeps the values it "
                    "could not read. They were written around the API's checks (a direct "
                    "database write, an old release, a bad restore); the other intents were "
                    "sent. For a policy version or job set aside (docs/operations.md, "
                    "`quarantined`), publish a sound policy and cancel or re-create the job."
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
