"""Alerts for intents that do not get sent: retried again and again, held
back by a paused provider account, or waiting longer than their policy
allows.

Neither kind is "due and unclaimed" (a deferred intent is due later) nor
"unreconciled" (nothing was accepted), so the other conditions never see
them: a provider that answers 429 for ever, a misconfigured adapter, a
report file gone from disk.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from tidings.domain.breaker import ACCOUNT_RESTRICTED, SHARED_MAX_SECONDS
from tidings.domain.schedules import DEFAULT_MAX_PENDING_SECONDS
from tidings.observability.alerts.config import RECIPIENTS_CAP, AlertConfig
from tidings.observability.alerts.rules import Alert, Conn, duration_text
from tidings.providers.outcomes import RejectCode
from tidings.store import alert_scans
from tidings.store.database import Row

_PROVIDER_CODES = sorted(code.value for code in RejectCode)


def evaluate_retries(conn: Conn, now: datetime, config: AlertConfig) -> list[Alert]:
    retrying = alert_scans.retrying(conn, _PROVIDER_CODES, config.retry_warn_failures)
    stale = alert_scans.pending_too_long(conn, now, DEFAULT_MAX_PENDING_SECONDS, RECIPIENTS_CAP)
    paused = alert_scans.provider_paused(conn, now)
    return [*_retrying(retrying, config), *_paused(paused, now), *_pending(stale, now)]


def _paused(rows: list[Row], now: datetime) -> Iterator[Alert]:
    for row in rows:
        left = max(0.0, (row["paused_until"] - now).total_seconds())
        held: datetime | None = row["tenant_held_until"]
        # Only a tenant's own traffic is named to it: another tenant's name
        # would leak across tenants (the log and the metric name it).
        caused_by = "this tenant's traffic" if row["own_traffic"] else "another tenant's traffic"
        action = (
            f"{row['account']} said back off ({row['code']}, {row['failures']} answer(s) in a "
            f"row), drawn by {caused_by}: every worker waits for it, other accounts go on. "
            + _held_text(held)
            + _check_text(row["code"])
            + f"the pause ends by itself at {row['paused_until'].isoformat()}. "
            f"Run `tidings timeline {row['sample_id']}`."
        )
        yield Alert(
            row["tenant_id"],
            f"provider_paused:{row['account']}",
            "provider_paused",
            "warning",
            f"{row['account']} paused for {duration_text(left)} after {row['code']} "
            f"({caused_by}): {row['intents']} {row['channel']} intent(s) wait",
            {
                "provider": row["account"],
                "channel": row["channel"],
                "code": row["code"],
                "failures": row["failures"],
                "paused_until": row["paused_until"].isoformat(),
                "caused_by": caused_by,
                "tenant_held_until": held.isoformat() if held else None,
                "affected_intents": row["intents"],
                "sample_intent_id": str(row["sample_id"]),
                "action": action,
            },
        )


def _check_text(code: str) -> str:
    if code == ACCOUNT_RESTRICTED:  # the account's state, not a pace (provider_refused pages)
        return (
            "The account is restricted (a sandbox, a whitelist, a suspension): lift the "
            "restriction in the provider's console; the intents wait unsent meanwhile, and "
        )
    return "Check the provider's status page and your account's rate limits; "


def _held_text(held: datetime | None) -> str:
    if held is None:
        return ""
    return (
        "This tenant's own traffic keeps drawing the answers, so its claims on the account "
        f"back off further, until {held.isoformat()}, while other tenants wait at most "
        f"{SHARED_MAX_SECONDS:g} s per answer; lower the policy's `rate_limits` for the "
        "`provider_account` scope to pace below the provider's limit. "
    )


def _retrying(rows: list[Row], config: AlertConfig) -> Iterator[Alert]:
    for row in rows:
        codes = ", ".join(row["codes"] or [])
        action = (
            f"The provider keeps refusing ({codes}). Check its status page and the "
            "adapter's settings (tidings_provider_calls_total by outcome); a missing "
            f"report file shows as PROVIDER_ERROR. Run `tidings timeline {row['worst_id']}`. "
            "Each intent ends `failed` at its policy's retry.max_failures."
        )
        yield Alert(
            row["tenant_id"],
            f"retrying:{row['channel']}",
            "provider_retrying",
            "warning",
            f"{row['channel']}: {row['intents']} intent(s) retried at least "
            f"{config.retry_warn_failures} times (most: {row['max_failures']}), last codes {codes}",
            {
                "channel": row["channel"],
                "event_classes": row["event_classes"] or [],
                "affected_intents": row["intents"],
                "max_failures": row["max_failures"],
                "codes": row["codes"] or [],
                "worst_intent_id": str(row["worst_id"]),
                "threshold": config.retry_warn_failures,
                "action": action,
            },
        )


def _pending(rows: list[Row], now: datetime) -> Iterator[Alert]:
    for row in rows:
        age = max(0.0, (now - row["oldest_at"]).total_seconds())
        codes = ", ".join(row["codes"] or []) or "none"
        action = (
            f"Run `tidings timeline {row['oldest_id']}`: its decision codes ({codes}) say why "
            "it waits (a quiet window, a rate limit, a provider refusing). Check that "
            "`tidings worker` runs; cancel what is no longer wanted."
        )
        # Past the cap the scan stopped counting: the oldest are all it read.
        count = f"at least {row['intents']:,}" if row["intents_more"] else row["intents"]
        yield Alert(
            row["tenant_id"],
            f"pending_too_long:{row['channel']}",
            "pending_too_long",
            "warning",
            f"{row['channel']}: {count} intent(s) unsent for longer than their policy "
            f"allows ({duration_text(row['allowed_seconds'])}), oldest {duration_text(age)}",
            {
                "channel": row["channel"],
                "event_classes": row["event_classes"] or [],
                "affected_intents": row["intents"],
                # True when the count stopped at the cap: it is "at least".
                "affected_intents_more": row["intents_more"],
                "oldest_pending_age_seconds": round(age, 3),
                "oldest_intent_id": str(row["oldest_id"]),
                "allowed_seconds": row["allowed_seconds"],
                "codes": row["codes"] or [],
                "action": action,
            },
        )
