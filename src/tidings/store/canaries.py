"""Synthetic canaries' answers (the one door to `canary_results`).

Deployment-wide rows, apart from member traffic: a canary writes here and
nowhere else (dispatch/canary.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from tidings.store.database import Row, execute, fetch_all

Conn = psycopg.Connection[Any]
ANSWER_CHARS = 1000


@dataclass(frozen=True)
class CanaryResult:
    account: str
    channel: str
    at: datetime
    target: str
    ok: bool
    code: str
    answer: str = ""


def record(conn: Conn, result: CanaryResult) -> None:
    params = {
        "account": result.account,
        "channel": result.channel,
        "at": result.at,
        "target": result.target,
        "ok": result.ok,
        "code": result.code,
        "answer": result.answer[:ANSWER_CHARS],
    }
    execute(conn, "canary_record", params)


def latest(conn: Conn) -> list[Row]:
    """The newest answer per account and channel, by account then channel."""
    return fetch_all(conn, "canary_latest", {})


def purge(conn: Conn, before: datetime) -> None:
    """Forget answers older than `before`, keeping each pair's newest."""
    execute(conn, "canary_purge", {"before": before})
