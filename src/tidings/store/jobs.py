"""Jobs and their frozen audiences: the one door to `jobs` and `job_recipients`
besides the retention purge (store/retention.py).

A job's recipients arrive by COPY (jobs/freeze.py) or from an audience
upload (`freeze_upload_recipients`); the reads here page them into intents.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from tidings.store.database import Row, execute, fetch_all, fetch_one
from tidings.store.queries import q

Conn = psycopg.Connection[Any]


def insert(conn: Conn, values: Mapping[str, Any]) -> Row | None:
    """The new job; None when a concurrent create with the same key won."""
    return fetch_one(conn, "insert_job", values)


def by_key(conn: Conn, tenant_id: str, idempotency_key: str) -> Row | None:
    return fetch_one(
        conn, "job_by_key", {"tenant_id": tenant_id, "idempotency_key": idempotency_key}
    )


def by_id(conn: Conn, tenant_id: str, job_id: UUID) -> Row | None:
    return fetch_one(conn, "job_by_id", {"tenant_id": tenant_id, "id": job_id})


def claim_preparing(conn: Conn) -> Row | None:
    """The oldest job waiting to be prepared, claimed for this transaction."""
    return fetch_one(conn, "claim_preparing_job", {})


def lock(conn: Conn, tenant_id: str, job_id: UUID) -> Row | None:
    return fetch_one(conn, "lock_job", {"tenant_id": tenant_id, "id": job_id})


def prepared(conn: Conn, tenant_id: str, job_id: UUID, now: datetime) -> None:
    execute(conn, "job_prepared", {"tenant_id": tenant_id, "id": job_id, "now": now})


def progress(conn: Conn, tenant_id: str, job_id: UUID, seq: int, now: datetime) -> None:
    """The job is prepared through recipient `seq`."""
    execute(conn, "job_progress", {"tenant_id": tenant_id, "id": job_id, "seq": seq, "now": now})


def quarantine(conn: Conn, tenant_id: str, job_id: UUID, code: str, now: datetime) -> None:
    """Set a job aside so the jobs behind it are prepared (store/isolation.py)."""
    execute(
        conn, "quarantine_job", {"tenant_id": tenant_id, "id": job_id, "code": code, "now": now}
    )


def freeze_upload_recipients(
    conn: Conn, tenant_id: str, upload_id: UUID, job_id: UUID, now: datetime
) -> None:
    """An audience upload's members become the job's frozen recipients."""
    execute(
        conn,
        "freeze_upload_recipients",
        {"tenant_id": tenant_id, "id": upload_id, "job_id": job_id, "now": now},
    )


def recipients_page(conn: Conn, tenant_id: str, job_id: UUID, after: int, limit: int) -> list[Row]:
    return fetch_all(
        conn,
        "recipients_page",
        {"tenant_id": tenant_id, "job_id": job_id, "after": after, "limit": limit},
    )


def contacts_by_refs(conn: Conn, tenant_id: str, refs: Sequence[str]) -> list[Row]:
    return fetch_all(conn, "contacts_by_refs", {"tenant_id": tenant_id, "refs": refs})


def blocks_for_page(conn: Conn, tenant_id: str, hashes: Sequence[str]) -> list[Row]:
    """Opt-outs and suppressions of a page's destinations."""
    return fetch_all(conn, "blocks_for_page", {"tenant_id": tenant_id, "hashes": hashes})


def consents_for_refs(conn: Conn, tenant_id: str, refs: Sequence[str]) -> list[Row]:
    return fetch_all(conn, "consents_for_refs", {"tenant_id": tenant_id, "refs": refs})


def notify_due_channels(conn: Conn, channels: Sequence[str]) -> None:
    """Wake the workers of these channels: a page of intents is due."""
    fetch_all(conn, "notify_due_channels", {"channels": list(channels)})


def recipient_states(conn: Conn, tenant_id: str, job_id: UUID, after: int, limit: int) -> list[Row]:
    return fetch_all(
        conn,
        "job_recipient_states",
        {"tenant_id": tenant_id, "job_id": job_id, "after": after, "limit": limit},
    )


def copy_recipients(conn: Conn, rows: Iterable[tuple[Any, ...]]) -> None:
    """A job's frozen audience, in the columns of `copy_job_recipients`."""
    with conn.cursor().copy(q("copy_job_recipients")) as copy:
        for row in rows:
            copy.write_row(row)
