"""Ordinary mistakes at the `tidings` command answer with one line that says
what to do, exit 2 for usage and 1 for failure, never a traceback (issue 40)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tidings.cli.main import app


def test_version_prints_the_package_version() -> None:
    from importlib.metadata import version

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"tidings {version('tidings')}"


def test_policy_publish_of_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    result = CliRunner().invoke(app, ["policy", "publish", str(missing)])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    assert "no such file" in result.output.lower()
    assert str(missing) in result.output


def test_a_worker_with_no_provider_says_which_setting_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("TIDINGS_SIMULATOR_URL", "TIDINGS_SMS_PROVIDER", "TIDINGS_EMAIL_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    # Nothing listens here: the mistake must be found before the database is.
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:9/none")
    result = CliRunner().invoke(app, ["worker", "--database-wait-seconds", "0"])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: no provider configured: set TIDINGS_SIMULATOR_URL")
