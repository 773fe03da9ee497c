"""The scans behind the alert conditions, across every tenant (alert_scans.sql).

Each returns its rows as they come, one per tenant and group;
`observability/alerts/` decides from them what holds and how loud.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import psycopg

from tidings.store.database import Row, fetch_all

Conn = psycopg.Connection[Any]


def unreconciled(conn: Conn, unknown_since: datetime, cap: int) -> list[Row]:
    """Per event class and channel: sent with no terminal evidence, or given
    up as unknown since `unknown_since`, with what the page must name. The
    in-flight count and the oldest are exact; given-up ones and distinct
    recipients are counted up to `cap` (`unknown_more`, `recipients_more`
    say there may be more)."""
    return fetch_all(conn, "alert_unreconciled", {"unknown_since": unknown_since, "cap": cap})


def delivery_unknown(conn: Conn, since: datetime) -> list[Row]:
    """Per event class and channel: outcomes that stayed unknown since `since`."""
    return fetch_all(conn, "alert_delivery_unknown", {"since": since})


def due(conn: Conn, now: datetime, cap: int) -> list[Row]:
    """Per channel: intents due and not claimed, and whether a kill switch
    holds them. The oldest due is exact; intents and distinct recipients are
    those of the oldest `cap` + 1 (`intents_more` says there are more)."""
    return fetch_all(conn, "alert_due", {"now": now, "cap": cap})


def impossible_transitions(conn: Conn, allowed: Mapping[str, list[str]]) -> list[Row]:
    """Per tenant: audited moves outside `allowed` (parallel `froms`,
    `events` and `tos` lists), with up to five samples."""
    return fetch_all(conn, "alert_impossible_transitions", allowed)


def quarantined(conn: Conn, since: datetime) -> list[Row]:
    """Per tenant: intents, rows and documents set aside since `since`."""
    return fetch_all(conn, "alert_quarantined", {"since": since})


def retrying(conn: Conn, codes: Sequence[str], threshold: int) -> list[Row]:
    """Per tenant and channel: unsent intents deferred at least `threshold`
    times whose last answer carried one of the provider `codes`."""
    return fetch_all(conn, "alert_retrying", {"codes": codes, "threshold": threshold})


def pending_too_long(conn: Conn, now: datetime, default_seconds: float, cap: int) -> list[Row]:
    """Per tenant and channel: unsent intents older than their policy allows
    (`default_seconds` where it says nothing). The oldest is exact; counts
    stop at `cap` + 1 per tenant and state (`intents_more` says there are
    more)."""
    args = {"now": now, "default_seconds": default_seconds, "cap": cap}
    return fetch_all(conn, "alert_pending_too_long", args)


def provider_paused(conn: Conn, now: datetime) -> list[Row]:
    """Per tenant, account and channel: unsent intents a provider pause or a
    tenant's own back-off holds."""
    return fetch_all(conn, "alert_provider_paused", {"now": now})


def request_volume(
    conn: Conn, current: datetime, previous: datetime, baseline_from: datetime
) -> list[Row]:
    """Per tenant and volume key of the request edge: the counts of the
    `current` and `previous` windows and the sum from `baseline_from` up to
    `previous`; only keys with requests in the last two windows."""
    params = {"current": current, "previous": previous, "baseline_from": baseline_from}
    return fetch_all(conn, "alert_request_volume", params)


def provider_refused(conn: Conn, since: datetime) -> list[Row]:
    """Per tenant, channel, provider account and code: the refusals of our
    request, sender or account since `since`, and the newest one."""
    return fetch_all(conn, "alert_provider_refused", {"since": since})
