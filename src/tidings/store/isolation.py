"""One tenant's bad row or policy stops only that tenant (issue #39).

The shared loops (lease recovery, recording, job preparation, alert
evaluation, the purge, event pushes) each read many tenants' rows, and
each row names a policy version that decides its arithmetic. The parser
bounds every number (domain/policy_bounds.py), yet a row can still get
past it: planted around the checks, left by a bad restore, or naming a
version that is missing. The claim already sets such rows aside one by
one (dispatch/quarantine.py); this is the same rule for the other loops.
A failure of one tenant's row or document is caught, that row is
quarantined with a stable code, noted in `quarantine_log` for the
tenant's `quarantined` alert, and the loop goes on for everyone else.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from tidings.domain.errors import PolicyUnreadable
from tidings.store import attempts, jobs
from tidings.store.database import Database, execute

log = logging.getLogger("tidings.isolation")
Conn = psycopg.Connection[Any]

# The codes a loop quarantines with: the policy version its row names is
# missing, quarantined or refused by the parser; or the row itself cannot
# be read or written (a value past what Python or a column can hold).
POLICY_UNREADABLE = "POLICY_UNREADABLE"
ROW_UNREADABLE = "UNDECODABLE"

# What reading or deciding one bad row raises: psycopg cannot load a value,
# Python cannot parse or hold it (`datetime.fromisoformat`, a date overflow),
# or JSON nested too deep to decode; the policy store's PolicyUnreadable is
# a ValueError. Not psycopg.OperationalError and the like: a database that
# is away says nothing about any row.
UNREADABLE: tuple[type[BaseException], ...] = (
    psycopg.DataError,
    ValueError,
    ArithmeticError,
    RecursionError,
)
FAILS_ALONE = UNREADABLE


def code_for(error: BaseException) -> str:
    return POLICY_UNREADABLE if isinstance(error, PolicyUnreadable) else ROW_UNREADABLE


def note(
    conn: Conn,
    tenant_id: str,
    loop: str,
    subject: str,
    error: BaseException,
    now: datetime,
    *,
    code: str | None = None,
) -> str:
    """Record what `loop` set aside for the tenant; its code. The kind of
    error is kept, never its message (it may quote a tenant's value)."""
    code = code or code_for(error)
    params = {
        "tenant_id": tenant_id,
        "loop": loop,
        "subject": subject,
        "code": code,
        "error": type(error).__name__,
        "now": now,
    }
    execute(conn, "note_quarantine", params)
    extra = {"tenant_id": tenant_id, "loop": loop, "subject": subject, "code": code}
    log.error("set aside for one tenant: %s", code, extra={**extra, "error": params["error"]})
    return code


def note_alone(
    db: Database,
    tenant_id: str,
    loop: str,
    subject: str,
    error: BaseException,
    now: datetime,
    *,
    code: str | None = None,
) -> str:
    """`note` in a transaction of its own (the loop's own was rolled back)."""
    with db.transaction() as conn:
        return note(conn, tenant_id, loop, subject, error, now, code=code)


def quarantine_sending(
    conn: Conn, tenant_id: str, intent_id: UUID, now: datetime, error: BaseException, actor: str
) -> bool:
    """Park a `sending` intent the sweeper cannot recover as `unknown`
    (attempts.sql says why); False if it was no longer `sending`."""
    code = code_for(error)
    params = {
        "tenant_id": tenant_id,
        "id": intent_id,
        "now": now,
        "code": code,
        "actor": actor,
        "error": type(error).__name__,
    }
    moved = attempts.quarantine_sending(conn, params)
    note(conn, tenant_id, "recover_leases", f"intent:{intent_id}", error, now, code=code)
    return moved


def quarantine_job(
    db: Database, tenant_id: str, job_id: UUID, now: datetime, error: BaseException
) -> None:
    """A job whose preparation failed on its own rows or policy is no longer
    picked, so the jobs behind it are prepared."""
    with db.transaction() as conn:
        code = note(conn, tenant_id, "prepare_job", f"job:{job_id}", error, now)
        jobs.quarantine(conn, tenant_id, job_id, code, now)
