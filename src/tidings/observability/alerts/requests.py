"""The `request_anomaly` alert: a country's or prefix's requests of a
user-triggered class jumped against its own baseline (SMS pumping, issue #41).

The edge counts every request of a bounded SMS class, refused ones too
(intake/edge.py); domain/request_anomaly.py decides what is a jump. An
alert names the tenant (its row's), the class, the country or prefix and
the numbers, and clears itself when the last hour falls back.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

from tidings.domain.limits import window_start
from tidings.domain.request_anomaly import (
    BASELINE_HOURS,
    Anomaly,
    Thresholds,
    Volume,
    anomalies,
)
from tidings.domain.request_limits import VOLUME_SECONDS, volume_parts
from tidings.observability.alerts.config import AlertConfig, Severity
from tidings.observability.alerts.rules import KILL_SWITCH, Alert, Conn
from tidings.store import alert_scans
from tidings.store.database import Row

CONDITION = "request_anomaly"


def evaluate_requests(conn: Conn, now: datetime, config: AlertConfig) -> list[Alert]:
    current = window_start(VOLUME_SECONDS, now)
    hour = timedelta(seconds=VOLUME_SECONDS)
    rows = alert_scans.request_volume(
        conn, current, current - hour, current - hour * (BASELINE_HOURS + 1)
    )
    elapsed = (now - current).total_seconds() / VOLUME_SECONDS
    limits = Thresholds(config.request_floor, config.request_factor)
    return [_alert(a, config) for a in anomalies(_volumes(rows), elapsed, limits)]


def _volumes(rows: list[Row]) -> Iterator[Volume]:
    for row in rows:
        parts = volume_parts(row["key"])
        if parts is None:  # not written by the edge: nothing to say about it
            continue
        event_class, country, prefix = parts
        yield Volume(
            row["tenant_id"],
            event_class,
            country,
            prefix,
            int(row["current"]),
            int(row["previous"]),
            int(row["baseline_total"]),
        )


def _alert(a: Anomaly, config: AlertConfig) -> Alert:
    severity: Severity = "page" if a.recent >= config.request_page_requests else "warning"
    where = f"prefix {a.value} ({a.country})" if a.scope == "prefix" else f"country {a.value}"
    summary = (
        f"{a.event_class} requests to {where}: {a.recent} in the last hour, "
        f"{a.ratio:.1f}x its baseline of {a.baseline_per_hour:.1f}/h: possible SMS pumping"
    )
    return Alert(
        a.tenant_id,
        f"{CONDITION}:{a.event_class}:{a.scope}:{a.value}",
        CONDITION,
        severity,
        summary,
        {
            "event_class": a.event_class,
            "scope": a.scope,
            "country": a.country,
            "prefix": a.value if a.scope == "prefix" else None,
            "busiest_prefixes": list(a.prefixes),
            "requests_last_hour": a.recent,
            "baseline_per_hour": round(a.baseline_per_hour, 3),
            "ratio": round(a.ratio, 2),
            "thresholds": {
                "floor": config.request_floor,
                "factor": config.request_factor,
                "page_requests": config.request_page_requests,
            },
            "action": _action(a),
        },
    )


def _action(a: Anomaly) -> str:
    return (
        f"Requests counted here include those the edge refused (429 REQUEST_LIMIT). If "
        f"they are not your users': lower the policy's user_triggered bounds for "
        f"{a.event_class}, or stop SMS to {a.country} (the policy's channels.sms.countries, "
        f'or {KILL_SWITCH} {{"enabled": true, "scope": {{"channel": "sms", "country": '
        f'"{a.country}"}}}}); block the prefixes at the provider (geo permissions); check '
        "the reset form's callers (accounts, addresses, captcha). The console's spend "
        "breakers show what the country may still cost."
    )
