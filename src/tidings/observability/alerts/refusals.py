"""The `provider_refused` alert: a provider refused our request, our sender
or our account (DESIGN invariant 12, issue #37).

Such a refusal suppresses nobody: the intent fails with a code that says
whose fault it is (domain/feedback.py), and an account restriction pauses
the account (dispatch/backoff.py). An operator must fix it, so each
tenant's refusals within the window raise one alert per channel, provider
account and code: the count, the newest sample (intent, attempt, the
provider's status and own code; never a destination or a body) and what to
check. It clears when the window holds no such refusal.

A refused sender or a restricted account fails every send alike, so they
page at once; an invalid request may be one template's or one caller's,
so it warns, and pages from `refusal_page_requests` in the window up.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

from tidings.observability.alerts.config import AlertConfig, Severity
from tidings.observability.alerts.rules import Alert, Conn, duration_text
from tidings.store import alert_scans
from tidings.store.database import Row

CONDITION = "provider_refused"
_ALWAYS_PAGE = frozenset({"SENDER_REJECTED", "ACCOUNT_RESTRICTED"})
_WHAT = {
    "REQUEST_INVALID": "refused our request as invalid",
    "SENDER_REJECTED": "refused our sender",
    "ACCOUNT_RESTRICTED": "refused: our account is restricted",
}


def evaluate_refusals(conn: Conn, now: datetime, config: AlertConfig) -> list[Alert]:
    since = now - timedelta(seconds=config.refusal_window_seconds)
    return list(_alerts(alert_scans.provider_refused(conn, since), config))


def _alerts(rows: list[Row], config: AlertConfig) -> Iterator[Alert]:
    window = duration_text(config.refusal_window_seconds)
    for row in rows:
        code, account, channel = row["code"], row["account"], row["channel"]
        severity = _severity(code, int(row["refusals"]), config)
        status = row["http_status"]
        yield Alert(
            row["tenant_id"],
            f"{CONDITION}:{channel}:{account}:{code}",
            CONDITION,
            severity,
            f"{channel} via {account}: {row['refusals']} send(s) {_WHAT[code]} ({code}) "
            f"in the last {window}; the intents failed, nobody was suppressed",
            {
                "channel": channel,
                "provider": account,
                "code": code,
                "refusals": int(row["refusals"]),
                "window_seconds": config.refusal_window_seconds,
                "first_at": row["first_at"].isoformat(),
                "latest_at": row["latest_at"].isoformat(),
                "sample": {
                    "intent_id": str(row["sample_id"]),
                    "attempt": row["sample_n"],
                    "http_status": int(status) if status is not None else None,
                    "provider_code": row["provider_code"],
                },
                "page_requests": config.refusal_page_requests,
                "action": _action(code, account, str(row["sample_id"])),
            },
        )


def _severity(code: str, refusals: int, config: AlertConfig) -> Severity:
    if code in _ALWAYS_PAGE or refusals >= config.refusal_page_requests:
        return "page"
    return "warning"


def _action(code: str, account: str, sample: str) -> str:
    check = {
        "REQUEST_INVALID": (
            "Check the request we send: the template's revision (an empty body or subject, a "
            "variable that renders empty), the provider template ids it maps to, the "
            "message stream, the attachment; the provider's code in the sample names the "
            "field."
        ),
        "SENDER_REJECTED": (
            f"Check the sender identity {account} sends from: the From address or domain "
            "(verified, SPF/DKIM), the SMS sender id or origination number (registered for "
            "the destination country, 10DLC/toll-free verification)."
        ),
        "ACCOUNT_RESTRICTED": (
            f"Check {account}'s account restrictions: a sandbox or trial account "
            "(verified recipients only), a whitelist, geo permissions, a suspension or a "
            "spending cap, in the provider's console. Meanwhile the account is paused "
            "(provider_paused, tidings_provider_paused_seconds): queued intents wait unsent "
            "and are tried again when the pause ends."
        ),
    }[code]
    return (
        f"{check} Nobody was suppressed and nothing is resent: once fixed, create new "
        f"intents (new idempotency keys) for those that failed. Run `tidings timeline {sample}`."
    )
