"""Mistakes about the ledger: an id it does not hold, a database never
migrated, a server that does not answer. One line and exit 1, never a
traceback (issue 40)."""

from __future__ import annotations

import sys
import uuid

import pytest
from psycopg.conninfo import make_conninfo
from typer.testing import CliRunner

from tests.conftest import TEST_SECRET
from tests.databases import admin
from tidings.cli.main import app, main


def test_timeline_of_an_unknown_intent_says_so_in_one_line(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("TIDINGS_SECRET_KEY", TEST_SECRET)
    unknown = "01900000-0000-7000-8000-000000000000"
    result = CliRunner().invoke(app, ["timeline", unknown])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == [f"error: no intent {unknown} in this tenant; check the id (and --tenant)"]


def _run_main(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    """The installed `tidings` entry point, in process: `main`, not `app`,
    because the database mistakes are caught around the whole command."""
    monkeypatch.setattr(sys, "argv", ["tidings", *args])
    with pytest.raises(SystemExit) as stopped:
        main()
    return int(stopped.value.code or 0)


def test_a_database_never_migrated_says_run_migrate_in_one_line(
    db_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"tidings_empty_{uuid.uuid4().hex[:8]}"
    admin(db_url, f"CREATE DATABASE {name}")
    try:
        monkeypatch.setenv("DATABASE_URL", make_conninfo(db_url, dbname=name))
        monkeypatch.setenv("TIDINGS_SECRET_KEY", TEST_SECRET)
        code = _run_main(monkeypatch, "timeline", "01900000-0000-7000-8000-000000000000")
        err = capsys.readouterr().err
        assert code == 1, err
        assert "Traceback" not in err
        lines = [line for line in err.splitlines() if line.strip()]
        assert lines[-1].startswith("error: the database has no tidings schema"), err
        assert lines[-1].endswith("run `tidings migrate` first")
        assert len(lines) == 1, err
    finally:
        admin(db_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_a_database_that_does_not_answer_is_one_line_at_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody:secret-pw@127.0.0.1:9/none")
    monkeypatch.setenv("TIDINGS_SECRET_KEY", TEST_SECRET)
    for command in (["keys", "list"], ["timeline", "01900000-0000-7000-8000-000000000000"]):
        assert _run_main(monkeypatch, *command) == 1
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: the database did not answer"), err
        assert "check DATABASE_URL" in lines[0] and "secret-pw" not in err
