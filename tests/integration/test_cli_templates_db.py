"""`tidings templates publish|list|show`: a tenant's templates from a shell,
`--json` as the API answers GET /v1/templates (issue 40)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.conftest import TEST_SECRET
from tidings.api.schemas.admin import TemplateList, TemplateOut
from tidings.cli.main import app
from tidings.client import Tidings

HELLO = {
    "name": "hello",
    "channel": "sms",
    "locale": "en",
    "body": "Hello {{ name }}",
    "required_variables": ["name"],
    "provider_template_ids": {"simulator": "sim-hello"},
}


@pytest.fixture
def cli(db_url: str, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("TIDINGS_SECRET_KEY", TEST_SECRET)
    for name in ("TIDINGS_SIMULATOR_URL", "TIDINGS_SMS_PROVIDER", "TIDINGS_EMAIL_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    return CliRunner()


def write(tmp_path: Path, document: Any, name: str = "hello.json") -> Path:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def run(cli: CliRunner, *args: str) -> tuple[int, list[str]]:
    result = cli.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result.exit_code, [line for line in result.output.splitlines() if line.strip()]


def test_publish_then_list_and_show(cli: CliRunner, tmp_path: Path) -> None:
    code, lines = run(cli, "templates", "publish", str(write(tmp_path, HELLO)))
    assert code == 0, lines
    assert lines[0].startswith("published hello revision 1 (sms, en, content ")
    code, lines = run(cli, "templates", "list")
    assert code == 0, lines
    assert any(line.split()[:4] == ["hello", "sms", "en", "1"] for line in lines), lines
    assert any("cli" in line for line in lines), "who published it"
    code, lines = run(cli, "templates", "show", "hello")
    assert code == 0, lines
    text = "\n".join(lines)
    assert "Hello {{ name }}" in text and "name" in text and "sim-hello" in text


def test_json_is_the_apis(cli: CliRunner, tmp_path: Path, db_url: str) -> None:
    run(cli, "templates", "publish", str(write(tmp_path, HELLO)))
    with Tidings(db_url, secret_key=TEST_SECRET) as t:
        expected = TemplateList(items=[TemplateOut.of(r) for r in t.latest_templates()])
    listed = cli.invoke(app, ["templates", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.output) == expected.model_dump(mode="json")
    shown = cli.invoke(app, ["templates", "show", "hello", "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output) == expected.items[0].model_dump(mode="json")


def test_publishing_the_same_content_again_says_so(cli: CliRunner, tmp_path: Path) -> None:
    path = write(tmp_path, HELLO)
    run(cli, "templates", "publish", str(path))
    code, lines = run(cli, "templates", "publish", str(path))
    assert code == 0, lines
    assert lines[0].startswith("unchanged: hello revision 1 already has this content")


def test_show_a_revision_by_number_channel_and_locale(cli: CliRunner, tmp_path: Path) -> None:
    run(cli, "templates", "publish", str(write(tmp_path, HELLO)))
    run(cli, "templates", "publish", str(write(tmp_path, {**HELLO, "body": "Hi {{ name }}"})))
    german = write(tmp_path, {**HELLO, "locale": "de", "body": "Hallo"})
    run(cli, "templates", "publish", str(german))
    code, lines = run(cli, "templates", "show", "hello", "--revision", "1")
    assert code == 0 and any("Hello {{ name }}" in line for line in lines), lines
    code, lines = run(cli, "templates", "show", "hello", "--channel", "sms", "--locale", "en")
    assert code == 0 and any("Hi {{ name }}" in line for line in lines), lines
    code, lines = run(cli, "templates", "show", "hello", "--locale", "de")
    assert code == 0 and any("Hallo" in line for line in lines), lines


def test_a_second_tenant_sees_only_its_own(cli: CliRunner, tmp_path: Path) -> None:
    run(cli, "templates", "publish", str(write(tmp_path, HELLO)))
    code, lines = run(cli, "templates", "list", "--tenant", "beta")
    assert code == 0 and not any("hello" in line for line in lines), lines
    code, lines = run(cli, "templates", "show", "hello", "--tenant", "beta")
    assert code == 1
    assert lines == ["error: no template hello in tenant beta; see `tidings templates list`"]
    other = write(tmp_path, {**HELLO, "body": "Beta {{ name }}"}, "beta.json")
    code, lines = run(cli, "templates", "publish", str(other), "--tenant", "beta")
    assert code == 0 and "revision 1" in lines[0], lines
    listed = cli.invoke(app, ["templates", "list", "--tenant", "beta", "--json"])
    assert [i["body"] for i in json.loads(listed.output)["items"]] == ["Beta {{ name }}"]


def test_a_file_without_locale_is_published_in_english(cli: CliRunner, tmp_path: Path) -> None:
    document = {k: v for k, v in HELLO.items() if k != "locale"}
    code, lines = run(cli, "templates", "publish", str(write(tmp_path, document)))
    assert code == 0, lines
    shown = cli.invoke(app, ["templates", "show", "hello", "--json"])
    assert json.loads(shown.output)["locale"] == "en"


def test_unknown_revision_and_filters_are_one_line(cli: CliRunner, tmp_path: Path) -> None:
    run(cli, "templates", "publish", str(write(tmp_path, HELLO)))
    code, lines = run(cli, "templates", "show", "hello", "--revision", "7")
    assert (code, len(lines)) == (1, 1) and lines[0].startswith("error: no revision 7 of hello")
    code, lines = run(cli, "templates", "show", "hello", "--channel", "email")
    assert (code, len(lines)) == (1, 1) and lines[0].startswith("error: no email template hello")


@pytest.mark.parametrize(
    ("content", "exit_code", "start"),
    [
        (None, 2, "error: cannot read "),
        ("{not json", 2, "error: "),
        ({**HELLO, "chanel": "sms"}, 1, "error: hello.json: UNKNOWN_FIELD chanel: "),
        ({**HELLO, "body": "Hello {{ nmae }}"}, 1, "error: hello.json: UNDECLARED_VARIABLE"),
    ],
)
def test_a_file_that_cannot_be_published_says_why(
    cli: CliRunner, tmp_path: Path, content: Any, exit_code: int, start: str
) -> None:
    path = tmp_path / "hello.json" if content is None else write(tmp_path, content)
    code, lines = run(cli, "templates", "publish", str(path))
    assert code == exit_code, lines
    assert lines and all(line.startswith(("error: ", "warning: ")) for line in lines), lines
    assert lines[0].startswith(start), lines
    listed = cli.invoke(app, ["templates", "list", "--json"])
    assert json.loads(listed.output) == {"items": []}, "nothing was published"


def test_a_warning_is_printed_and_the_revision_published(cli: CliRunner, tmp_path: Path) -> None:
    document = {**HELLO, "required_variables": ["name", "unused"]}
    code, lines = run(cli, "templates", "publish", str(write(tmp_path, document)))
    assert code == 0, lines
    assert lines[0].startswith("published hello revision 1")
    assert any(line.startswith("warning: hello.json: UNUSED_VARIABLE") for line in lines), lines
