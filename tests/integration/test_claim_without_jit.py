"""The claim is never JIT-compiled (found by the hour's soak, issue #43).

The planner prices the claim's lanes as if every tenant's and every job's
backlog were read, so with a few hundred thousand intents its price
crossed PostgreSQL's JIT thresholds: on PostgreSQL 15 with LLVM (Debian's,
the soak's Patroni members) each claim of 20 rows took 7.7 s, 7.6 of them
compiling, and the big job's dispatch fell to a few intents a second. The
embedded server has no LLVM, so no benchmark there could show it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import uuid4

import pytest

from tidings import Tidings
from tidings.store import claims

LANES = claims.Lanes(urgent_limit=10, horizon_seconds=300.0)
ARGS: dict[str, Any] = {"channel": "sms", "limit": 20, "account": "simulator"}

CLAIMS: dict[str, Callable[..., Any]] = {
    "due": lambda conn, now: claims.due(conn, now=now, lanes=LANES, **ARGS),
    "due_ids": lambda conn, now: claims.due_ids(conn, now=now, lanes=LANES, **ARGS),
    "one": lambda conn, now: claims.one(conn, "default", uuid4(), now=now, **ARGS),
}


def _jit(conn: Any) -> str:
    row = conn.execute("SELECT current_setting('jit') AS jit").fetchone()
    return str(row["jit"] if isinstance(row, dict) else row[0])


@pytest.mark.parametrize("claim", sorted(CLAIMS))
def test_a_claim_turns_jit_off_for_its_own_transaction_only(tidings: Tidings, claim: str) -> None:
    now = tidings.runtime.clock.now()
    with tidings.db.transaction() as conn:
        conn.execute("SELECT set_config('jit', 'on', true)")  # as a server's default has it
        CLAIMS[claim](conn, now)
        assert _jit(conn) == "off"
    with tidings.db.transaction() as conn:
        assert _jit(conn) != "off" or _server_default_is_off(conn)


def _server_default_is_off(conn: Any) -> bool:
    row = conn.execute("SELECT reset_val FROM pg_settings WHERE name = 'jit'").fetchone()
    return (row["reset_val"] if isinstance(row, dict) else row[0]) == "off"
