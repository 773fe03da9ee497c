"""Provider accounts paused for every worker (the one door to `provider_pauses`)."""

from __future__ import annotations

import random
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import psycopg

from tidings.domain.breaker import pause_for
from tidings.store.database import execute, fetch_all, fetch_one

Conn = psycopg.Connection[Any]


def note_backoff(
    conn: Conn,
    account: str,
    code: str,
    retry_after: float | None,
    now: datetime,
    rng: random.Random,
) -> datetime | None:
    """Count one back-off answer; returns until when the account is paused."""
    row = fetch_one(conn, "provider_pause_lock", {"account": account})
    pause = pause_for(code, retry_after, int(row["failures"]) if row else 0, rng)
    if pause is None:
        return None
    until = now + timedelta(seconds=pause.seconds or 0.0)
    stored = fetch_one(
        conn,
        "provider_pause_note",
        {
            "account": account,
            "until": until,
            "failures": pause.failures,
            "code": code,
            "now": now,
        },
    )
    assert stored is not None
    paused_until: datetime = stored["paused_until"]
    return paused_until if paused_until > now else None


def note_accepted(conn: Conn, accounts: Iterable[str], now: datetime) -> None:
    names = sorted(set(accounts))
    if names:
        execute(conn, "provider_pause_reset", {"accounts": names, "now": now})


def paused_until(conn: Conn, account: str, now: datetime) -> datetime | None:
    row = fetch_one(conn, "provider_paused_until", {"account": account, "now": now})
    return row["paused_until"] if row else None


def active(conn: Conn, now: datetime) -> list[dict[str, Any]]:
    return fetch_all(conn, "provider_pauses_active", {"now": now})
