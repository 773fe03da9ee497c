"""What a CLI command says when the database is not there or not ready.

Each is one line naming the cause and the command that fixes it (issue #40,
point 2); the libpq and pool messages name hosts and ports, never a password.
"""

from __future__ import annotations

import psycopg
from psycopg import errors as pg
from psycopg_pool import PoolTimeout

# A schema that is missing or older than this code: a relation, column or
# function the code names does not exist yet.
SCHEMA_MISSING = (pg.UndefinedTable, pg.UndefinedColumn, pg.UndefinedFunction)
DATABASE_MISTAKES = (*SCHEMA_MISSING, PoolTimeout, psycopg.OperationalError)


def database_mistake(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, SCHEMA_MISSING):
        return (
            f"error: the database has no tidings schema, or an older one ({first});"
            " run `tidings migrate` first"
        )
    return (
        f"error: the database did not answer ({first}); check DATABASE_URL"
        " and that PostgreSQL is running"
    )
