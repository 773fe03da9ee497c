"""The limit of dispatch's own SQL, part 1: the statements, captured.

A real `Worker` (`Worker.run` on its threads, the configuration scenario 1
gives each worker process, the in-process simulator) dispatches a clone of
scenario 1's seeded database while every named query it issues through
`tidings.store.database` (`fetch_one`, `fetch_all`, `execute`) is recorded
with its parameters, grouped by the transaction or autocommitted statement
it ran in (`Database.transaction`, `Database.statements`).

Only the dispatch path is kept: the channel loop's claims (claim with policy
facts, the moves with their audit rows, the attempts opened) and records
(the acceptances and the intents' moves), and the send threads' call-started
marks, in the sizes the worker chose. Maintenance (heartbeat, sweep, alerts,
reconciliation), job preparation, event pushes and the clock's anchor run on
timers, not per intent, and are left out, as are claims that found nothing.
If the dispatch path issues any other group of statements, the capture
fails: the replay (bench/same_sql_replay.py) would no longer be the same SQL.
"""

from __future__ import annotations

import copy
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from unittest import mock
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb

from bench.context import Context
from bench.procs import WorkerSpec, adapter, worker_config
from bench.progress import mark, wait_dispatched
from bench.seed import engine
from tidings.dispatch.runner import Worker
from tidings.store import database

# Intents dispatched for the trace: enough for several full claims (a
# window of 256) and many record groups, so the tail's smaller claim weighs
# little; the replay loops over the trace.
CAPTURE_INTENTS = 2000
WARM_INTENTS = 8  # dispatched before recording: template and policy caches, prepared statements
CAPTURE_CAP_S = 120.0

CLAIM = (
    "provider_paused_until",
    "claim_without_jit",
    "claim_due",
    "shadow_controls",
    "transition_many",
    "open_attempts",
)
MARK = ("attempts_call_started",)
RECORD = (
    "provider_ids_recording",
    "attempts_accepted",
    "transition_many",
    "provider_pause_reset",
    "provider_backoff_reset",
)
KINDS = {CLAIM: "claim", MARK: "mark", RECORD: "record"}
# On the dispatch threads but not per intent: a claim that found nothing (a
# channel's idle scan), the clock's periodic anchor, a template cache fill.
NOT_PER_INTENT = {("provider_paused_until", "claim_without_jit", "claim_due"), ("database_time",),
                  ("template_revision",)}  # fmt: skip
DISPATCH_THREADS = ("dispatch-", "send-")
HELPERS = ("fetch_one", "fetch_all", "execute")


@dataclass
class Op:
    helper: str  # the tidings.store.database function that ran it
    name: str  # the named query
    params: dict[str, Any]  # plain values; a batch's rows as a list under "rows"


@dataclass
class Unit:
    """One transaction (or autocommitted statement) and what it ran."""

    thread: str
    autocommit: bool
    ops: list[Op] = field(default_factory=list)
    kind: str = ""  # claim, mark or record, once checked
    at: datetime | None = None  # its `now`: the replay shifts every time by the same
    claimed: list[tuple[UUID, int]] = field(default_factory=list)  # a claim's (id, version)s

    @property
    def signature(self) -> tuple[str, ...]:
        return tuple(op.name for op in self.ops)


@dataclass
class Trace:
    units: list[Unit]
    provider_ids: frozenset[str]  # the simulator's answers: made unique in each replay


def capture_dispatch(ctx: Context, template: str) -> Trace:
    """The dispatch path's statements for CAPTURE_INTENTS intents (fewer
    when the run's N is smaller), checked."""
    name, dsn = ctx.server.fresh("dispatch_capture", template)
    try:
        return _capture(dsn, min(CAPTURE_INTENTS, ctx.config.intents - WARM_INTENTS))
    finally:
        ctx.server.drop(name)


def _capture(dsn: str, count: int) -> Trace:
    _only_due(dsn, count + WARM_INTENTS)
    spec = WorkerSpec(dsn)
    sender = adapter(spec)
    with engine(dsn, spec.pool_size) as t:
        worker = Worker(t.runtime, {"sms": sender, "email": sender}, config=worker_config(spec))
        for claimed in worker.claim("sms", WARM_INTENTS):
            worker.send_and_record(claimed)
        with psycopg.connect(dsn, autocommit=True) as conn:
            since = mark(conn)
        recorder = _Recorder()
        with recorder.recording():
            stop = threading.Event()
            runner = threading.Thread(target=worker.run, args=(stop,))
            runner.start()
            started = time.perf_counter()
            done, _ = wait_dispatched(dsn, count, started, CAPTURE_CAP_S, since)
            stop.set()
            runner.join()
    if done < count:
        raise RuntimeError(f"the capture worker dispatched {done} of {count} intents")
    return _checked(recorder.units, count)


def _only_due(dsn: str, count: int) -> None:
    """Leave the first `count` intents due: the worker drains them and stops with
    every claim marked and recorded (a trace cut mid-flight would not be)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE intents SET next_due_at = next_due_at + interval '1 day'"
            " WHERE id NOT IN (SELECT id FROM intents WHERE state = 'pending'"
            " ORDER BY next_due_at, id LIMIT %s)",
            (count,),
        )


class _Recorder:
    """Records named queries by thread, in the unit (transaction) they ran in."""

    def __init__(self) -> None:
        self.units: list[Unit] = []
        self._local = threading.local()
        self._lock = threading.Lock()

    @contextmanager
    def recording(self) -> Iterator[None]:
        with ExitStack() as stack:
            for method in ("transaction", "statements"):
                real = getattr(database.Database, method)
                stack.enter_context(mock.patch.object(database.Database, method, self._unit(real)))
            for module, helper in _helper_users():  # a list: patching changes what it finds
                real = getattr(database, helper)
                stack.enter_context(mock.patch.object(module, helper, self._op(helper, real)))
            yield

    def _unit(self, real: Callable[..., Any]) -> Callable[..., Any]:
        @contextmanager
        def opened(db: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
            outer = getattr(self._local, "unit", None)
            with real(db, *args, **kwargs) as conn:
                if outer is None:  # a nested one (a savepoint) belongs to the outer unit
                    self._local.unit = Unit(threading.current_thread().name, conn.autocommit)
                    self._local.conn = conn
                try:
                    yield conn
                finally:
                    if outer is None:
                        self._keep(self._local.unit)
                        self._local.unit = self._local.conn = None

        return opened

    def _op(self, helper: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(conn: Any, name: str, params: Any) -> Any:
            found = real(conn, name, params)
            op = Op(helper, name, {k: _plain(v) for k, v in params.items()})
            unit = getattr(self._local, "unit", None)
            if unit is None or conn is not self._local.conn:
                # Outside the thread's transaction: the clock's anchor, read
                # on a pooled connection of its own, within a claim or not.
                self._keep(Unit(threading.current_thread().name, conn.autocommit, [op]))
                return found
            unit.ops.append(op)
            if name == "claim_due":
                unit.claimed = [(r["id"], r["version"]) for r in found]
            if unit.at is None and isinstance(params.get("now"), datetime):
                unit.at = params["now"]
            return found

        return call

    def _keep(self, unit: Unit) -> None:
        with self._lock:
            self.units.append(unit)


def _helper_users() -> list[tuple[Any, str]]:
    """Every tidings module holding a helper by name (`from ... import fetch_all`)."""
    return [
        (module, helper)
        for module in list(sys.modules.values())
        if getattr(module, "__name__", "").startswith("tidings.") and module is not database
        for helper in HELPERS
        if getattr(module, helper, None) is getattr(database, helper)
    ]


def _plain(value: Any) -> Any:
    # A batch's rows arrive as one Jsonb (database.records); keep the list,
    # so the replay can put fresh ids in and dump it again the same way.
    return copy.deepcopy(value.obj if isinstance(value, Jsonb) else value)


def _checked(units: list[Unit], count: int) -> Trace:
    kept = []
    for unit in units:
        if not unit.thread.startswith(DISPATCH_THREADS) or unit.signature in NOT_PER_INTENT:
            continue
        kind = KINDS.get(unit.signature)
        if kind is None:
            raise RuntimeError(
                f"dispatch's statements changed: {unit.signature} on {unit.thread};"
                " update bench/same_sql_dispatch.py"
            )
        unit.kind = kind
        kept.append(unit)
    counts = {kind: sum(_intents(u) for u in kept if u.kind == kind) for kind in KINDS.values()}
    if set(counts.values()) != {count}:
        raise RuntimeError(
            f"dispatch's statements changed: intents claimed, marked, recorded {counts},"
            f" each expected {count}; update bench/same_sql_dispatch.py"
        )
    return Trace(kept, _provider_ids(kept))


def _intents(unit: Unit) -> int:
    """How many intents a unit claims, marks or records."""
    if unit.kind == "claim":
        return len(unit.claimed)
    batch = "attempts_call_started" if unit.kind == "mark" else "attempts_accepted"
    return sum(len(op.params["rows"]) for op in unit.ops if op.name == batch)


def summary(trace: Trace) -> str:
    """How the worker grouped its statements, for the report."""
    parts = []
    for kind in KINDS.values():
        units = [u for u in trace.units if u.kind == kind]
        intents = sum(map(_intents, units))
        parts.append(f"{len(units)} {kind}s of {intents / max(1, len(units)):.1f} intents")
    return "statements captured from a real worker: " + ", ".join(parts)


def _provider_ids(units: list[Unit]) -> frozenset[str]:
    return frozenset(
        row["provider_message_id"]
        for unit in units
        for op in unit.ops
        if op.name == "attempts_accepted"
        for row in op.params["rows"]
    )
