"""`--profile`: scenario 1's work under a sampling profiler.

A separate pass after the measured ones, so profiling never distorts the
figures. One worker's loop (`dispatch_once`: claim, then send and record
each intent) runs on a fresh clone of the seeded intents in one thread, so
every sample lands in the dispatch path. pyinstrument is used when
installed (in process); otherwise py-spy, attached to a child process.
"""

from __future__ import annotations

import multiprocessing as mp
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.context import Context
from bench.seed import engine, seeded_template

TOP = 8


def profile_dispatch(ctx: Context) -> dict[str, Any]:
    print("== profile")
    ctx.config.results_dir.mkdir(parents=True, exist_ok=True)
    stem = ctx.config.results_dir / f"{time.strftime('%Y-%m-%d')}-profile"
    name, dsn = ctx.server.fresh("profile", seeded_template(ctx, ctx.config.intents))
    try:
        try:
            import pyinstrument  # noqa: F401
        except ImportError:
            if shutil.which("py-spy"):
                return _with_py_spy(dsn, ctx.config.seconds, stem)
            return {"profiler": "none", "note": "install pyinstrument or py-spy to profile"}
        return _with_pyinstrument(dsn, ctx.config.seconds, stem)
    finally:
        ctx.server.drop(name)


def dispatch_loop(dsn: str, seconds: float) -> int:
    from tidings.dispatch.runner import Worker
    from tidings.providers.simulator import SimulatorCore
    from tidings.providers.simulator.in_process import InProcessSimulatorAdapter

    adapter = InProcessSimulatorAdapter(SimulatorCore())
    with engine(dsn, 2) as t:
        worker = Worker(t.runtime, {"sms": adapter})
        started, done = time.perf_counter(), 0
        while time.perf_counter() - started < seconds:
            claimed = worker.dispatch_once("sms")
            if not claimed:
                break
            done += claimed
    return done


def _with_pyinstrument(dsn: str, seconds: float, stem: Path) -> dict[str, Any]:
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.001)
    profiler.start()
    done = dispatch_loop(dsn, seconds)
    session = profiler.stop()
    html, text = stem.with_suffix(".html"), stem.with_suffix(".txt")
    html.write_text(profiler.output_html())
    text.write_text(profiler.output_text(unicode=True, show_all=False))
    root = session.root_frame()
    return {
        "profiler": f"pyinstrument {_version('pyinstrument')}",
        "file": f"{html.name} (tree: {text.name})",
        "intents": done,
        "seconds": round(session.duration, 1),
        "cpu_seconds": round(session.cpu_time, 1),
        "hot_spots": _attributed(root),
        "self_time": _self_times(root),
    }


def _walk(frame: Any) -> Any:
    yield frame
    for child in frame.children:
        yield from _walk(child)


def _where(frame: Any) -> str:
    return f"{frame.file_path_short}:{frame.line_no}"


def _self_times(root: Any) -> list[dict[str, Any]]:
    """Functions by time spent in their own code (callees excluded)."""
    spent: Counter[tuple[str, str]] = Counter()
    for frame in _walk(root):
        if not frame.is_synthetic:
            spent[(frame.function, _where(frame))] += frame.total_self_time
    return _top(spent, "self_s")


def _ours(frame: Any) -> bool:
    path = frame.file_path or ""
    if frame.is_synthetic or "tidings/" not in path or "/bench/" in path:
        return False
    # The SQL helpers are see-through: a query's wait belongs to the function
    # that named the query. `transaction` stays: its time is BEGIN and COMMIT.
    return not (path.endswith("store/database.py") and frame.function != "transaction")


def _attributed(root: Any) -> list[dict[str, Any]]:
    """tidings functions by their own time plus what they spent in libraries
    and PostgreSQL (callees in tidings excluded): where the time goes."""
    spent: Counter[tuple[str, str]] = Counter()

    def visit(frame: Any, owner: tuple[str, str] | None) -> None:
        if _ours(frame):
            if owner:
                spent[owner] -= frame.time
            owner = (frame.function, _where(frame))
            spent[owner] += frame.time
        for child in frame.children:
            visit(child, owner)

    visit(root, None)
    return _top(spent, "attributed_s")


def _top(spent: Counter[tuple[str, str]], unit: str) -> list[dict[str, Any]]:
    return [{"function": f, "where": w, unit: round(s, 3)} for (f, w), s in spent.most_common(TOP)]


def _with_py_spy(dsn: str, seconds: float, stem: Path) -> dict[str, Any]:
    raw = stem.with_suffix(".raw.txt")
    child = mp.get_context("spawn").Process(target=dispatch_loop, args=(dsn, seconds))
    child.start()
    command = ["py-spy", "record", "--format", "raw", "-o", str(raw), "-p", str(child.pid)]
    subprocess.run([*command, "-d", str(round(seconds))], check=False, capture_output=True)
    child.join(seconds + 30)
    leaves: Counter[str] = Counter()
    if raw.exists():
        for line in raw.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            leaves[stack.split(";")[-1]] += int(count)
    total = sum(leaves.values()) or 1
    spots = [{"function": f, "where": "py-spy leaf", "attributed_s": round(n / total * seconds, 3)}
             for f, n in leaves.most_common(TOP)]  # fmt: skip
    return {"profiler": "py-spy", "file": raw.name, "hot_spots": spots}


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)
