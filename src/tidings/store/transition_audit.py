"""The transition audit, kept (transition_audit.sql, migration 0038).

The one door to `transition_audit`, `impossible_transitions` and
`transition_audit_mark`. A metrics scrape and an alert round each fold the
transitions committed since the last fold, a batch at a time, then read
what is kept (metrics_reads.sql, alert_scans.sql): both read the same rows,
so they cannot disagree, and neither recounts the audit.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import psycopg

from tidings.store.database import fetch_one

Conn = psycopg.Connection[Any]
log = logging.getLogger(__name__)

# A batch is a few thousand index entries: well inside a scrape's statement
# timeout. A fold stops after BATCHES of them; the next one goes on.
BATCH = 5000
BATCHES = 20


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
        for _ in range(BATCHES):
            with conn.transaction():
                n, more = _fold_batch(conn, allowed, batch)
            folded += n
            if not more:
                break
    except psycopg.errors.QueryCanceled:
        log.warning("transition audit: a fold batch timed out; the next fold goes on")
    return folded


def _fold_batch(conn: Conn, allowed: Mapping[str, list[str]], batch: int) -> tuple[int, bool]:
    """The next batch: rows older than 0038 first, by id; then by txid."""
    mark = fetch_one(conn, "transition_audit_mark", {})
    if mark is None:
        return 0, False
    if mark["unaudited_after"] is not None:
        args = {**allowed, "after": mark["unaudited_after"], "limit": batch}
        return _count(fetch_one(conn, "transition_audit_fold_unaudited", args)), True
    args = {**allowed, "txid": mark["folded_txid"], "id": mark["folded_id"], "limit": batch}
    n = _count(fetch_one(conn, "transition_audit_fold", args))
    return n, n == batch


def _count(row: Mapping[str, Any] | None) -> int:
    return int(row["n"]) if row else 0
