"""The limit of dispatch's own SQL, part 2: the statements, replayed.

The trace captured from a real worker (bench/same_sql_dispatch.py) is run
again, in its order, by 2 spawned processes with one connection each, on a
twin of scenario 1's database (same seed, same N due intents): each
transaction as a transaction, each mark autocommitted, every statement
through the same helper with the same parameters, as prepared statements.
No engine logic runs: no policy evaluation, rendering, decryption, provider
call or answer parsing.

Each replayed claim takes fresh due rows (the claim query itself does, with
SKIP LOCKED); the captured intents it stands for are mapped to them in
order, and every later statement of the pass names the new rows instead:
their ids, versions and attempt keys. Times move by how long ago the unit
was captured, and the provider's ids get a suffix per pass, so no index
sees the same key twice. A process loops over the trace until a claim
finds nothing due or the time cap passes. Intents per second = intents the
replayed records moved to `accepted`, from the go until both are done.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import dict_row

from bench.context import Context
from bench.progress import states
from bench.same_sql_dispatch import Op, Trace, Unit
from bench.spawned import Link, Spawned
from tidings.store import database

PROCESSES = 2


def dispatch_limit(ctx: Context, template: str, trace: Trace) -> float:
    """Intents/s of the trace's statements alone, on a fresh twin of `template`."""
    name, dsn = ctx.server.fresh("dispatch_sql", template)
    try:
        arguments = [(dsn, trace, index, ctx.config.seconds) for index in range(PROCESSES)]
        with Spawned(_replayer, arguments) as group:
            started = group.go()
            results = group.results(ctx.config.seconds + 60)
        done = sum(moved for moved, _ in results)
        elapsed = max(end for _, end in results) - started
        # Every counted move must be a row the replay left accepted: a
        # mapping gone wrong would move nothing and still look fast.
        accepted = states(dsn).get("accepted", 0)
        if accepted != done:
            raise RuntimeError(f"the replay counted {done} moves but left {accepted} accepted")
        return float(done / elapsed)
    finally:
        ctx.server.drop(name)


def _replayer(dsn: str, trace: Trace, index: int, seconds: float, link: Link) -> None:
    logging.basicConfig(level=logging.WARNING)
    # As the engine's pool makes them: dict rows, a transaction per unit.
    with psycopg.connect(dsn, row_factory=dict_row, autocommit=False) as conn:
        changing = _changing(trace)
        started = link.wait_go()
        deadline, done, passes, more = started + seconds, 0, 0, True
        while more and time.monotonic() < deadline:
            swap = _Swap(trace.provider_ids, f"{index}.{passes}", changing)
            moved, more = _pass(conn, trace, swap, deadline)
            done, passes = done + moved, passes + 1
        link.done((done, time.monotonic()))


def _changing(trace: Trace) -> dict[int, tuple[str, ...]]:
    """By captured row: the fields holding a time or a provider id, found
    before the clock starts. Only those are rebuilt in a pass, so the
    replay's own Python stays small beside the statements it stands for."""
    probe = _Swap(trace.provider_ids, "", {})
    return {
        id(row): tuple(k for k, v in row.items() if probe.moves(v))
        for unit in trace.units
        for op in unit.ops
        for row in op.params.get("rows", ())
    }


def _pass(
    conn: psycopg.Connection[Any], trace: Trace, swap: _Swap, deadline: float
) -> tuple[int, bool]:
    """The trace once: (intents moved to accepted, whether any were still due)."""
    moved, drained = 0, False
    for unit in trace.units:
        if time.monotonic() >= deadline:
            break
        if drained and unit.kind == "claim":
            continue
        assert unit.at is not None
        swap.shift = datetime.now(UTC) - unit.at
        found = _unit(conn, unit, swap)
        # Nothing due any more: the pass goes on without claiming, since
        # the marks and records of intents claimed before come later in
        # the trace (the worker records one claim while making the next).
        drained = drained or found is None
        moved += found or 0
    return moved, not drained


def _unit(conn: psycopg.Connection[Any], unit: Unit, swap: _Swap) -> int | None:
    """Run one unit: intents it moved to accepted, or None when a claim found nothing."""
    if unit.kind == "mark":  # as Database.statements: autocommitted
        conn.autocommit = True
        try:
            _run(conn, unit.ops[0], swap)
        finally:
            conn.autocommit = False
        return 0
    moved = 0
    with conn.transaction():
        for op in unit.ops:
            rows = _run(conn, op, swap)
            if op.name == "claim_due":
                if not rows:
                    return None
                swap.learn(unit.claimed, rows)
            elif unit.kind == "record" and op.name == "transition_many":
                moved = len(rows)
    return moved


def _run(conn: psycopg.Connection[Any], op: Op, swap: _Swap) -> Any:
    params = swap.params(op.params)
    if params is None:  # every row names an intent this pass did not claim
        return []
    helper = getattr(database, op.helper)
    return helper(conn, op.name, params)


class _Swap:
    """The captured intents as the rows this pass claimed, and times moved to now."""

    def __init__(
        self, provider_ids: frozenset[str], tag: str, changing: dict[int, tuple[str, ...]]
    ) -> None:
        self.provider_ids, self.tag = provider_ids, tag
        self.ids: dict[UUID, tuple[UUID, int]] = {}  # captured id -> (new id, version step)
        self.shift = timedelta(0)
        self.changing = changing  # see _changing

    def learn(self, captured: list[tuple[UUID, int]], rows: list[dict[str, Any]]) -> None:
        # Fewer rows than captured near the queue's end: the rest stay unmapped.
        for (old, version), row in zip(captured, rows, strict=False):
            self.ids[old] = (row["id"], row["version"] - version)

    def params(self, params: dict[str, Any]) -> dict[str, Any] | None:
        out = {k: self.value(v) for k, v in params.items() if k not in ("rows", "count")}
        if "rows" in params:
            rows = [r for r in map(self.row, params["rows"]) if r is not None]
            if not rows:
                return None
            out.update(database.records(rows))
        return out

    def row(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """The row for this pass's intent; None when the pass claimed none for it."""
        key = "id" if "id" in row else "intent_id"
        found = self.ids.get(row[key])
        if found is None:
            return None
        new, step = found
        out = dict(row)
        for k in self.changing[id(row)]:
            out[k] = self.value(row[k])
        out[key] = new
        if "version" in row:
            out["version"] = row["version"] + step
        if "attempt_key" in row:  # derived from the intent's id
            out["attempt_key"] = row["attempt_key"].replace(str(row[key]), str(new))
        return out

    def moves(self, value: Any) -> bool:
        """Whether `value` holds something `value()` changes."""
        if isinstance(value, datetime):
            return True
        if isinstance(value, str):
            return value in self.provider_ids
        if isinstance(value, list):
            return any(map(self.moves, value))
        if isinstance(value, dict):
            return any(map(self.moves, value.values()))
        return False

    def value(self, value: Any) -> Any:
        if isinstance(value, datetime):
            return value + self.shift
        if isinstance(value, str):
            return f"{value}.{self.tag}" if value in self.provider_ids else value
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        return value
