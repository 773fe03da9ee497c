"""The demo's reads (demo.sql): a scenario's intents, a report's next
revision, and every ledger row as text for its token scan."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import psycopg

from tidings.store.database import Row, fetch_all, fetch_one

Conn = psycopg.Connection[Any]


def scenario_intents(
    conn: Conn, tenant: str, job_id: UUID | None, intent_ids: Sequence[UUID]
) -> list[Row]:
    """`id, state, decision_code, keys` of a job's intents and the listed ones."""
    return fetch_all(
        conn,
        "scenario_intents",
        {
            "tenant_id": tenant,
            "job_id": str(job_id) if job_id else None,
            "ids": [str(i) for i in intent_ids],
        },
    )


def next_report_revision(conn: Conn, tenant: str, report_id: str) -> int:
    row = fetch_one(conn, "next_report_revision", {"tenant_id": tenant, "id": report_id})
    return int(row["next"]) if row else 1


def ledger_text(conn: Conn) -> list[str]:
    """Every row of the ledger tables, each as its text."""
    return [r["dump"] for r in fetch_all(conn, "dump_table_text", {})]
