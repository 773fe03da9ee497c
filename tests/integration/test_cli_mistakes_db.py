"""`tidings timeline` with an id the ledger does not hold: one line and exit 1,
never a traceback (issue 40)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tests.conftest import TEST_SECRET
from tidings.cli.main import app


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
