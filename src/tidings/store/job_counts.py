"""A job's kept numbers (migrations/0033_job_counts.sql): read here, written
by the schema's triggers in the transactions that change them.

`job_counts` has no writing door in Python: the triggers on intents,
attempts, transitions, observations and job_recipients keep it, so no
transition can be recorded without its count (tests/unit/test_doors.py
lists it as trigger-kept).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import psycopg

from tidings.store.database import Row, fetch_all

Conn = psycopg.Connection[Any]


def of_job(conn: Conn, tenant: str, job_id: UUID) -> list[Row]:
    """`channel, state, code` with their summed figures and latest change."""
    return fetch_all(conn, "job_counts_of_job", {"tenant_id": tenant, "job_id": job_id})


def states_of_jobs(conn: Conn, tenant: str, job_ids: Sequence[UUID]) -> list[Row]:
    """`job_id, state, n` for the given jobs."""
    return fetch_all(conn, "job_state_counts_of_jobs", {"tenant_id": tenant, "job_ids": job_ids})
