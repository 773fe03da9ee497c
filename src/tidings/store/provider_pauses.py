"""Provider accounts paused for every worker, and tenants held back on one
(the one door to `provider_pauses` and `provider_backoffs`)."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg

from tidings.domain.breaker import SHARED_MAX_SECONDS, Pause, answers_before, pause_for
from tidings.store.database import execute, fetch_all, fetch_one

Conn = psycopg.Connection[Any]


@dataclass(frozen=True)
class Backoff:
    """Until when one back-off answer paused the account for everyone, and
    held the tenant whose traffic drew it; None where it did not (yet)."""

    account_until: datetime | None
    tenant_until: datetime | None


def note_backoff(
    conn: Conn,
    account: str,
    tenant_id: str,
    code: str,
    retry_after: float | None,
    now: datetime,
    rng: random.Random,
) -> Backoff:
    """Count one back-off answer drawn by `tenant_id`'s traffic, twice: on the
    account (a pause for everyone, our own backoff capped at
    SHARED_MAX_SECONDS) and on the tenant (its own hold, growing on)."""
    row = fetch_one(conn, "provider_pause_lock", {"account": account})
    shared = pause_for(code, retry_after, _before(code, row), rng, cap=SHARED_MAX_SECONDS)
    if shared is None:
        return Backoff(None, None)
    keys = {"account": account, "tenant_id": tenant_id, "code": code, "now": now}
    own_row = fetch_one(conn, "provider_backoff_lock", keys)
    own = pause_for(code, retry_after, _before(code, own_row), rng)
    assert own is not None  # the same answer: a back-off for both counts
    account_until = _note(conn, "provider_pause_note", "paused_until", shared, keys)
    tenant_until = _note(conn, "provider_backoff_note", "held_until", own, keys)
    return Backoff(
        account_until if account_until > now else None,
        tenant_until if tenant_until > now else None,
    )


def _before(code: str, row: dict[str, Any] | None) -> int:
    return answers_before(code, row["code"], int(row["failures"])) if row else 0


def _note(conn: Conn, query: str, column: str, pause: Pause, keys: dict[str, Any]) -> datetime:
    until = keys["now"] + timedelta(seconds=pause.seconds or 0.0)
    stored = fetch_one(conn, query, {**keys, "until": until, "failures": pause.failures})
    assert stored is not None
    found: datetime = stored[column]
    return found


def note_accepted(conn: Conn, accepted: Iterable[tuple[str, str]], now: datetime) -> None:
    """(account, tenant) pairs whose messages the account accepted: both
    counts start again."""
    pairs = set(accepted)
    if not pairs:
        return
    accounts = sorted({a for a, _ in pairs})
    execute(conn, "provider_pause_reset", {"accounts": accounts, "now": now})
    tenants = sorted({t for _, t in pairs})
    execute(
        conn,
        "provider_backoff_reset",
        {"tenants": tenants, "accounts": accounts, "now": now},
    )


def paused_until(conn: Conn, account: str, now: datetime) -> datetime | None:
    row = fetch_one(conn, "provider_paused_until", {"account": account, "now": now})
    return row["paused_until"] if row else None


def active(conn: Conn, now: datetime) -> list[dict[str, Any]]:
    return fetch_all(conn, "provider_pauses_active", {"now": now})


def held(conn: Conn, now: datetime) -> list[dict[str, Any]]:
    """Tenants held back on an account by their own traffic's answers."""
    return fetch_all(conn, "provider_backoffs_active", {"now": now})
