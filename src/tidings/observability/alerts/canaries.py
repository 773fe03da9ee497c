"""The `canary_failed:<account>` alert: the newest synthetic canary through
a provider account failed (dispatch/canary.py, issue #41 item 2).

A canary goes to the provider's own test destination with fixed synthetic
text, so its failure is about the account, its credentials or the
provider, never about a member. The alert carries the provider's answer
(redacted and bounded, as stored) and what to check; it clears when the
account's newest round succeeds on every channel. Provider accounts are
the deployment's, shared by every tenant, so each tenant is told.
A page: a canary that fails means member traffic through that account is
likely failing too.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from itertools import groupby

from tidings.observability.alerts.config import AlertConfig
from tidings.observability.alerts.rules import Alert, Conn
from tidings.store import canaries, tenants
from tidings.store.database import Row

CONDITION = "canary_failed"


def evaluate_canaries(conn: Conn, now: datetime, config: AlertConfig) -> list[Alert]:
    failing = [row for row in canaries.latest(conn) if not row["ok"]]
    if not failing:
        return []
    everyone = tenants.every_tenant(conn)
    return [
        alert
        for account, rows in groupby(failing, key=lambda r: r["account"])
        for alert in _alerts(account, list(rows), everyone)
    ]


def _alerts(account: str, rows: list[Row], everyone: list[str]) -> Iterator[Alert]:
    channels = ", ".join(r["channel"] for r in rows)
    newest = max(rows, key=lambda r: r["at"])
    summary = (
        f"canary through {account} ({channels}) failed: {newest['code']}: {newest['answer'][:200]}"
    )
    details = {
        "provider": account,
        "failures": [
            {
                "channel": r["channel"],
                "target": r["target"],
                "at": r["at"].isoformat(),
                "code": r["code"],
                "answer": r["answer"],
            }
            for r in rows
        ],
        "action": (
            f"The synthetic canary to {account}'s own test destination failed, so member "
            f"traffic through {account} is likely failing too. Read the provider's answer "
            "above; check the account's credentials (and, for Twilio, its test credentials), "
            "the sender identity, the provider's status page and "
            f"tidings_provider_paused_seconds. Run `tidings canary run` to try again now: "
            "the alert clears when a round succeeds. Canaries never touch member intents, "
            "suppressions or limits."
        ),
    }
    for tenant_id in everyone:
        yield Alert(tenant_id, f"{CONDITION}:{account}", CONDITION, "page", summary, details)
