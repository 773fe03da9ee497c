"""Named SQL queries, loaded once from `sql/queries/*.sql`.

Each query starts with a `-- name: <name>` line; nobody hunts for SQL in
Python strings. A part two queries must share word for word (the claim's
lanes) is a fragment, `sql/fragments/<name>.sql`, written into each query
where it says `/* include: <name> */`.

Every query is named from `store/` alone: a store module `store/X.py`
names only the queries in `sql/queries/X.sql`, and every query file
belongs to the store module of its name. Each table that holds state is
written by one store module, its door; tests/unit/test_doors.py keeps both.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"/\* include: (\w+) \*/")


def _parse(text: str) -> dict[str, str]:
    parts = _HEADER.split(text)
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


@cache
def all_queries() -> dict[str, str]:
    found: dict[str, str] = {}
    folder = resources.files("tidings.store").joinpath("sql", "queries")
    for item in sorted(folder.iterdir(), key=lambda p: p.name):
        if item.name.endswith(".sql"):
            for name, sql in _parse(item.read_text()).items():
                if name in found:
                    raise RuntimeError(f"query {name} is defined twice")
                found[name] = _INCLUDE.sub(lambda m: fragment(m.group(1)), sql)
    return found


@cache
def fragment(name: str) -> str:
    path = resources.files("tidings.store").joinpath("sql", "fragments", f"{name}.sql")
    return path.read_text().strip()


# A query whose best plan depends on how big a young table is right now
# carries this line: it is planned at each execution, with its parameters,
# never kept as a prepared statement's generic plan (docs/benchmarks.md,
# "Plans right from the first row").
PLAN_EACH_TIME = "-- plan: each time"


@cache
def planned_each_time() -> frozenset[str]:
    return frozenset(name for name, sql in all_queries().items() if PLAN_EACH_TIME in sql)


def q(name: str) -> str:
    try:
        return all_queries()[name]
    except KeyError:
        raise KeyError(f"no SQL query named {name!r}") from None
