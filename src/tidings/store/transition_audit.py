"""The transition audit, kept (transition_audit.sql, migrations 0038, 0049).

The one door to `transition_audit`, `impossible_transitions`,
`transition_minutes` and `transition_audit_mark`. A metrics scrape and an
alert round each fold the transitions committed since the last fold, a
batch at a time, then read what is kept (metrics_reads.sql,
alert_scans.sql): both read the same rows, so they cannot disagree, and
neither recounts the audit. The console's chart reads the kept minutes and
what no fold has reached yet (`changes_since`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import psycopg

from tidings.store.database import Row, execute, fetch_all, fetch_one

Conn = psycopg.Connection[Any]
log = logging.getLogger(__name__)

# A batch is a few thousand index entries: well inside a scrape's statement
# timeout. A fold stops after BATCHES of them; the next one goes on.
BATCH = 5000
BATCHES = 20
# Unfolded transitions the chart reads by the folds' cursor before it
# recounts instead: a round's worth (30 s) at several thousand a second.
UNFOLDED_AT_MOST = 200_000


def fold(conn: Conn, allowed: Mapping[str, list[str]], *, batch: int = BATCH) -> int:
    """Count the transitions committed since the last fold; how many.

    `allowed` holds the transition table as parallel `froms`, `events` and
    `tos` lists. Folds nothing while another transaction folds: that one
    counts the same transitions. Each batch is a savepoint: one cut short
    by the caller's statement timeout ends the fold, not the caller's
    transaction, and the next fold takes it again.
    """
    folded = 0
    try:
        for number in range(BATCHES):
            with conn.transaction():
                n, more = _fold_batch(conn, allowed, batch, trim=number == 0)
            folded += n
            if not more:
                break
    except psycopg.errors.QueryCanceled:
        log.warning("transition audit: a fold batch timed out; the next fold goes on")
    return folded


def changes_since(
    conn: Conn, tenant: str, since: datetime, *, at_most: int = UNFOLDED_AT_MOST
) -> list[Row] | None:
    """`minute, from_state, to_state, n`: the tenant's transitions per minute
    since `since` (a minute's start), folded or not; None when they cannot be
    told exactly from what is kept (the caller recounts them)."""
    args = {"tenant_id": tenant, "since": since, "limit": at_most}
    rows = fetch_all(conn, "transition_minutes_since", args)
    if not rows or not rows[0]["exact"]:
        return None
    return [r for r in rows if r["minute"] is not None]


def _fold_batch(
    conn: Conn, allowed: Mapping[str, list[str]], batch: int, *, trim: bool
) -> tuple[int, bool]:
    """The next batch: rows older than 0038 first, by id; then by txid. The
    first batch of a fold also drops the minutes the chart no longer shows."""
    mark = fetch_one(conn, "transition_audit_mark", {})
    if mark is None:
        return 0, False
    if trim:  # by whoever holds the mark alone
        execute(conn, "transition_minutes_trim", {})
    if mark["unaudited_after"] is not None:
        args = {**allowed, "after": mark["unaudited_after"], "limit": batch}
        return _count(fetch_one(conn, "transition_audit_fold_unaudited", args)), True
    args = {**allowed, "txid": mark["folded_txid"], "id": mark["folded_id"], "limit": batch}
    n = _count(fetch_one(conn, "transition_audit_fold", args))
    return n, n == batch


def _count(row: Mapping[str, Any] | None) -> int:
    return int(row["n"]) if row else 0
