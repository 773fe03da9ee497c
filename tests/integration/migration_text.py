"""One statement of a migration, for a test that runs it again on rows it
loaded (a backfill must equal what the live code keeps)."""

from __future__ import annotations

import re
from importlib import resources


def migration_statement(file: str, verb: str) -> str:
    """The one statement of migration `file` that starts with `verb`."""
    text = resources.files("tidings.store").joinpath("sql", "migrations", file).read_text()
    body = re.sub(r"--[^\n]*", "", text)
    (statement,) = [s for s in body.split(";") if s.strip().startswith(verb)]
    return statement
