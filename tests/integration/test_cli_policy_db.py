"""`tidings policy publish|list|show`: a tenant's policy versions from a
shell, `--json` as the API answers GET /v1/policies (issue 40)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import TEST_SECRET
from tidings.api.schemas.admin import PolicyList, PolicyOut
from tidings.cli.main import app
from tidings.client import Tidings
from tidings.policies import builtin_document

DEFAULT = builtin_document("default")


@pytest.fixture
def cli(db_url: str, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("TIDINGS_SECRET_KEY", TEST_SECRET)
    return CliRunner()


def run(cli: CliRunner, *args: str) -> tuple[int, list[str]]:
    result = cli.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result.exit_code, [line for line in result.output.splitlines() if line.strip()]


def publish(cli: CliRunner, tmp_path: Path, version: str, tenant: str = "default") -> None:
    path = tmp_path / f"{version}.json"
    path.write_text(json.dumps({**DEFAULT, "version": version}))
    code, lines = run(cli, "policy", "publish", str(path), "--tenant", tenant)
    assert (code, lines) == (0, [f"published {version}"])


def test_publish_then_list_and_show(cli: CliRunner, tmp_path: Path, db_url: str) -> None:
    publish(cli, tmp_path, "v1")
    publish(cli, tmp_path, "v2")
    code, lines = run(cli, "policy", "list")
    assert code == 0, lines
    assert [line.split()[0] for line in lines] == ["v2", "v1"]
    assert "current" in lines[0] and "current" not in lines[1]
    shown = cli.invoke(app, ["policy", "show"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output) == {**DEFAULT, "version": "v2"}
    shown = cli.invoke(app, ["policy", "show", "v1", "--json"])
    assert json.loads(shown.output) == {**DEFAULT, "version": "v1"}
    with Tidings(db_url, secret_key=TEST_SECRET) as t:
        items = [PolicyOut(**r) for r in t.policy_versions()]
    listed = cli.invoke(app, ["policy", "list", "--json"])
    expected = PolicyList(current="v2", items=items).model_dump(mode="json")
    assert json.loads(listed.output) == expected


def test_a_second_tenant_has_its_own_versions(cli: CliRunner, tmp_path: Path) -> None:
    publish(cli, tmp_path, "v1")
    code, lines = run(cli, "policy", "list", "--tenant", "beta")
    assert (code, lines) == (0, ["no policy published in tenant beta"])
    listed = cli.invoke(app, ["policy", "list", "--tenant", "beta", "--json"])
    assert json.loads(listed.output) == {"current": None, "items": []}
    code, lines = run(cli, "policy", "show", "--tenant", "beta")
    assert (code, lines) == (1, ["error: no policy published in tenant beta"])
    publish(cli, tmp_path, "b1", tenant="beta")
    assert [line.split()[0] for line in run(cli, "policy", "list", "--tenant", "beta")[1]] == ["b1"]


def test_an_unknown_version_is_one_line(cli: CliRunner, tmp_path: Path) -> None:
    publish(cli, tmp_path, "v1")
    code, lines = run(cli, "policy", "show", "v9")
    assert code == 1
    assert lines == ["error: no policy version v9 in tenant default; see `tidings policy list`"]
