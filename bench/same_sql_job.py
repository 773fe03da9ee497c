"""The limit of a bulk job's own SQL: the freeze's and the preparation's
statements, captured from a real job and replayed with no engine logic
(`sql.job_prepared`, the baseline of `create.job_prepared`).

Capture: on a twin of the creation scenario's database, the library makes
the job `POST /v1/jobs` makes (`create_job` with the same body: the inline
audience resolved, sealed and COPYed into `job_recipients`) and then
prepares it (`prepare_jobs`: pages of recipients read, channels resolved,
intents and their rows COPYed into staging and inserted), while every
statement either issues on its connection is recorded at psycopg's level
(`Cursor.execute`, and `Cursor.copy` with every row written to it), grouped
by the transaction or autocommitted statement it ran in.

Replay: on a fresh twin of the same database, one connection made as the
engine's pool makes them runs the units in their order, each transaction
as a transaction, every statement with its captured text and parameters
and every COPY with its captured rows. The ids in them (job, intents,
destinations) are made in Python, so on the twin, where none exists yet,
the same parameters do the same inserts. No engine logic runs: no request
parsing, channel resolution, policy, encryption or row building. The
replay is checked to leave as many recipients and intents as the capture.
Recipients per second = the audience over the replay's time.

Not replayed: the HTTP request around the freeze (reading and parsing the
body, the API key), which `create.job_prepared` includes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import psycopg
from psycopg.rows import dict_row

from bench.api_client import job_body
from bench.context import Context
from bench.seed import engine
from tidings.store import database

COUNTED = ("job_recipients", "intents")


@dataclass
class Op:
    query: Any  # as the engine passed it
    params: Any
    kwargs: dict[str, Any]
    rows: list[tuple[Any, ...]] | None = None  # a COPY's rows; None for a statement


@dataclass
class Unit:
    autocommit: bool
    ops: list[Op] = field(default_factory=list)


@dataclass
class JobTrace:
    units: list[Unit]
    counts: dict[str, int]  # rows in COUNTED after the capture

    def summary(self) -> str:
        ops = [op for unit in self.units for op in unit.ops]
        copies = [op for op in ops if op.rows is not None]
        rows = sum(len(op.rows or ()) for op in copies)
        return (
            f"statements captured from a real job: {len(self.units)} transactions, "
            f"{len(ops) - len(copies)} statements, {len(copies)} COPYs of {rows:,} rows"
        )


def capture_job(ctx: Context, template: str, size: int) -> JobTrace:
    name, dsn = ctx.server.fresh("job_capture", template)
    try:
        recorder = _Recorder()
        with engine(dsn, 2) as t:
            body = job_body("same-sql", size)
            with recorder.recording():
                t.create_job(actor="bench", **body)
                t.prepare_jobs()
        return JobTrace(recorder.units, _counts(dsn))
    finally:
        ctx.server.drop(name)


def job_limit(ctx: Context, template: str, trace: JobTrace, size: int) -> float:
    """Recipients/s of the trace's statements alone, on a fresh twin of `template`."""
    name, dsn = ctx.server.fresh("job_sql", template)
    try:
        with psycopg.connect(dsn, row_factory=dict_row, autocommit=False) as conn:
            started = time.perf_counter()
            for unit in trace.units:
                _unit(conn, unit)
            elapsed = time.perf_counter() - started
        counts = _counts(dsn)
        if counts != trace.counts:
            raise RuntimeError(f"the replay left {counts}, the capture {trace.counts}")
        return size / elapsed
    finally:
        ctx.server.drop(name)


def _unit(conn: psycopg.Connection[Any], unit: Unit) -> None:
    if unit.autocommit:  # as Database.statements
        conn.autocommit = True
        try:
            _ops(conn, unit.ops)
        finally:
            conn.autocommit = False
        return
    with conn.transaction():
        _ops(conn, unit.ops)


def _ops(conn: psycopg.Connection[Any], ops: list[Op]) -> None:
    cursor = conn.cursor()
    for op in ops:
        if op.rows is None:
            cursor.execute(op.query, op.params, **op.kwargs)
            continue
        with cursor.copy(op.query, op.params, **op.kwargs) as copy:
            for row in op.rows:
                copy.write_row(row)


def _counts(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        found = {}
        for table in COUNTED:
            row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            found[table] = int(row[0]) if row else 0
        return found


class _Recorder:
    """Every statement and COPY of the calling thread, by the unit it ran in."""

    def __init__(self) -> None:
        self.units: list[Unit] = []
        self._thread = threading.get_ident()
        self._unit: Unit | None = None
        self._conn: Any = None
        self._rows: list[tuple[Any, ...]] | None = None  # the open COPY's

    @contextmanager
    def recording(self) -> Iterator[None]:
        with ExitStack() as stack:
            db, cursor, copy = database.Database, psycopg.Cursor, psycopg.Copy
            for owner, method, wrap in (
                (db, "transaction", self._opened),
                (db, "statements", self._opened),
                (cursor, "execute", self._execute),
                (cursor, "copy", self._copy),
                (copy, "write_row", self._row),
            ):
                real = getattr(owner, method)
                stack.enter_context(mock.patch.object(owner, method, wrap(real)))
            yield

    def _mine(self) -> bool:
        return threading.get_ident() == self._thread

    def _opened(self, real: Callable[..., Any]) -> Callable[..., Any]:
        @contextmanager
        def opened(db: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
            outer = self._unit is not None or not self._mine()
            with real(db, *args, **kwargs) as conn:
                if not outer:
                    self._unit, self._conn = Unit(conn.autocommit), conn
                try:
                    yield conn
                finally:
                    if not outer:
                        assert self._unit is not None
                        self.units.append(self._unit)
                        self._unit = self._conn = None

        return opened

    def _keep(self, cursor: Any, op: Op) -> None:
        if not self._mine():
            return
        if self._unit is not None and cursor.connection is self._conn:
            self._unit.ops.append(op)
        else:  # on a connection of its own (a pool check, the clock's anchor)
            self.units.append(Unit(True, [op]))

    def _execute(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def execute(cursor: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
            self._keep(cursor, Op(query, params, kwargs))
            return real(cursor, query, params, **kwargs)

        return execute

    def _copy(self, real: Callable[..., Any]) -> Callable[..., Any]:
        @contextmanager
        def copy(cursor: Any, statement: Any, params: Any = None, **kwargs: Any) -> Iterator[Any]:
            op = Op(statement, params, kwargs, rows=[])
            self._keep(cursor, op)
            with real(cursor, statement, params, **kwargs) as opened:
                self._rows = op.rows
                try:
                    yield opened
                finally:
                    self._rows = None

        return copy

    def _row(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def write_row(copy: Any, row: Any) -> None:
            row = tuple(row)
            if self._rows is not None and self._mine():
                self._rows.append(row)
            real(copy, row)

        return write_row
