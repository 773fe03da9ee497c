"""Provider-side template ids (seed 002): a configured provider that sends by
a template of its own makes `tidings templates validate` report revisions
without an id for it, and a bulk job refuses such a revision before sending."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tidings import InvalidInput, Tidings
from tidings.cli import app
from tidings.providers.errors import ProviderConfigError
from tidings.providers.template_ids import ProviderMappingMissing, required_template_ids

from .api_support import auth, client, is_problem, new_key

SENDGRID_BY_TEMPLATE = {
    "TIDINGS_EMAIL_PROVIDER": "sendgrid",
    "TIDINGS_SENDGRID_API_KEY": "SG.not-a-real-key",
    "TIDINGS_SENDGRID_REQUIRE_TEMPLATE_ID": "true",
}


@pytest.fixture
def sendgrid_by_template(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TIDINGS_SIMULATOR_URL", raising=False)
    for name, value in SENDGRID_BY_TEMPLATE.items():
        monkeypatch.setenv(name, value)


def template_file(directory: Path, name: str, ids: dict[str, str]) -> None:
    document = {
        "name": name,
        "channel": "email",
        "locale": "en",
        "subject": "Report {{ report_name }}",
        "body": "Your report {{ report_name }} is ready.",
        "required_variables": ["report_name"],
        "provider_template_ids": ids,
    }
    (directory / f"{name}.json").write_text(json.dumps(document), encoding="utf-8")


def publish(t: Tidings, ids: dict[str, str] | None) -> int:
    return t.publish_template(
        "report_ready",
        channel="email",
        subject="Report {{ report_name }}",
        body="Your report {{ report_name }} is ready.",
        required_variables=["report_name"],
        provider_template_ids=ids,
    ).revision


def job(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "idempotency_key": "report:8421:revision:7",
        "event_class": "report_ready",
        "purpose": "transactional",
        "template": "report_ready",
        "channels": ["email"],
        "variables": {"report_name": "Q3 media"},
        "audience": [{"ref": "reader-1", "email": "reader1@example.com"}],
    }
    body.update(overrides)
    return body


# ------------------------------------------------------------ declaration


def test_only_a_provider_that_sends_by_template_and_is_told_to_needs_ids() -> None:
    env = dict(SENDGRID_BY_TEMPLATE)
    assert required_template_ids(None, env) == {"email": ("sendgrid",)}
    # Off by default: SendGrid then sends the body tidings rendered.
    del env["TIDINGS_SENDGRID_REQUIRE_TEMPLATE_ID"]
    assert required_template_ids(None, env) == {}
    # The simulator plays both channels, so both need ids when asked.
    sim = {"TIDINGS_SIMULATOR_REQUIRE_TEMPLATE_ID": "1"}
    assert required_template_ids("http://127.0.0.1:9", sim) == {
        "sms": ("simulator",),
        "email": ("simulator",),
    }


def test_asking_it_of_an_adapter_without_provider_templates_is_a_config_error() -> None:
    env = {"TIDINGS_SMS_PROVIDER": "twilio", "TIDINGS_TWILIO_REQUIRE_TEMPLATE_ID": "true"}
    with pytest.raises(ProviderConfigError, match="twilio does not send sms"):
        required_template_ids(None, env)


# ------------------------------------------------------------------- CLI


def test_templates_validate_names_a_misconfigured_provider_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TIDINGS_SIMULATOR_URL", raising=False)
    monkeypatch.setenv("TIDINGS_SMS_PROVIDER", "twilio")
    monkeypatch.setenv("TIDINGS_TWILIO_REQUIRE_TEMPLATE_ID", "true")
    template_file(tmp_path, "mapped", {})
    result = CliRunner().invoke(app, ["templates", "validate", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "'require_template_id'" in result.output and "Traceback" not in result.output


@pytest.mark.usefixtures("sendgrid_by_template")
def test_templates_validate_reports_revisions_without_the_configured_providers_id(
    tmp_path: Path,
) -> None:
    template_file(tmp_path, "mapped", {"sendgrid": "d-4f9a2c1e"})
    template_file(tmp_path, "unmapped", {"postmark": "report-ready"})
    result = CliRunner().invoke(app, ["templates", "validate", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert "unmapped.json: error PROVIDER_MAPPING_MISSING" in result.output
    assert "provider_template_ids.sendgrid" in result.output
    assert "mapped.json: ok" in result.output.splitlines()


def test_templates_validate_needs_no_id_when_no_provider_asks_for_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TIDINGS_SIMULATOR_URL", raising=False)
    monkeypatch.setenv("TIDINGS_EMAIL_PROVIDER", "sendgrid")
    template_file(tmp_path, "unmapped", {})
    result = CliRunner().invoke(app, ["templates", "validate", str(tmp_path)])
    assert result.exit_code == 0, result.output


# --------------------------------------------------------------- library


@pytest.mark.usefixtures("sendgrid_by_template")
def test_create_job_refuses_a_revision_without_the_providers_template_id(
    tidings: Tidings,
) -> None:
    revision = publish(tidings, {"postmark": "report-ready"})
    with pytest.raises(ProviderMappingMissing) as raised:
        tidings.create_job(**job())
    assert isinstance(raised.value, InvalidInput)
    assert raised.value.code == "PROVIDER_MAPPING_MISSING"
    assert raised.value.field == "template"
    message = raised.value.message
    assert "'report_ready'" in message and f"revision {revision}" in message
    assert "sendgrid" in message
    # Nothing was frozen: the same key is free for the fixed revision.
    fixed = publish(tidings, {"sendgrid": "d-4f9a2c1e"})
    created = tidings.create_job(**job(template={"name": "report_ready", "revision": fixed}))
    assert tidings.job(created["id"])["audience_size"] == 1


@pytest.mark.usefixtures("sendgrid_by_template")
def test_create_job_by_upload_is_refused_too(tidings: Tidings) -> None:
    publish(tidings, None)
    upload = tidings.upload_audience([{"ref": "reader-1", "email": "reader1@example.com"}])
    request = job(audience_upload=str(upload.id))
    del request["audience"]
    with pytest.raises(ProviderMappingMissing):
        tidings.create_job(**request)


# ------------------------------------------------------------------ HTTP


@pytest.mark.usefixtures("sendgrid_by_template")
def test_post_job_answers_422_with_a_stable_code_naming_template_revision_provider(
    tidings: Tidings,
) -> None:
    revision = publish(tidings, {})
    http, key = client(tidings), new_key(tidings, "default")
    body = job(template={"name": "report_ready"})
    problem = is_problem(
        http.post("/v1/jobs", json=body, headers=auth(key)), 422, "PROVIDER_MAPPING_MISSING"
    )
    assert problem["field"] == "template"
    assert "'report_ready'" in problem["detail"] and f"revision {revision}" in problem["detail"]
    assert "sendgrid" in problem["detail"]
