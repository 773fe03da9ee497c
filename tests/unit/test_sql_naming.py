"""Queries are named only from store/: everything above reads and writes
through a store module's typed functions.

A module names a query when it passes a query's name to the helpers that
run one (`fetch_one`, `fetch_all`, `execute`, `q`), or imports those
helpers at all (a name held in a variable is still a name). A string that
only happens to equal a query name (a route called `console_jobs`, the
action `suppress`) is not a use.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tidings
from tidings.store.queries import all_queries

SRC = Path(tidings.__file__).parent
RUNNERS = frozenset({"fetch_one", "fetch_all", "execute", "q", "all_queries"})
HELPER_MODULES = frozenset({"tidings.store.database", "tidings.store.queries"})


def _callee(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def query_uses(source: str, names: set[str]) -> list[str]:
    """The query names `source` runs, and each runner helper it imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and _callee(node) in RUNNERS:
            found |= {
                arg.value
                for arg in node.args
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                if arg.value in names
            }
        elif isinstance(node, ast.ImportFrom) and node.module in HELPER_MODULES:
            found |= {f"import {a.name}" for a in node.names if a.name in RUNNERS}
    return sorted(found)


def _outside_store() -> dict[str, list[str]]:
    names = set(all_queries())
    uses: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        module = path.relative_to(SRC)
        if module.parts[0] == "store":
            continue
        used = query_uses(path.read_text("utf-8"), names)
        if used:
            uses[module.as_posix()] = used
    return uses


def test_only_store_names_queries() -> None:
    offenders = {m: used for m, used in _outside_store().items()}
    assert not offenders, "queries named outside store/:\n" + "\n".join(
        f"  {m}: {', '.join(used)}" for m, used in offenders.items()
    )


def test_the_check_sees_a_named_query_and_ignores_a_lookalike() -> None:
    # Guards the check itself against passing vacuously.
    names = {"console_jobs", "alert_open"}
    named = 'from tidings.store.database import fetch_one\nfetch_one(conn, "alert_open", {})\n'
    assert query_uses(named, names) == ["alert_open", "import fetch_one"]
    assert query_uses('database.fetch_all(conn, "console_jobs", {})\n', names) == ["console_jobs"]
    lookalike = '@router.get("/jobs", name="console_jobs")\ndef jobs(): ...\n'
    assert query_uses(lookalike, names) == []
