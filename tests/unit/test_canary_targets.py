"""Each adapter's canary target (providers/canary_targets.py): where it
goes, how the provider is told it is a test, or why there is none."""

from __future__ import annotations

import json

import httpx
import pytest

from tidings.providers.canary_targets import (
    POSTMARK_TEST_TOKEN,
    SKIPPED,
    TARGETS,
    TWILIO_MAGIC_VALID,
    CanarySkipped,
    send_canary,
    targets_for,
    with_test_settings,
)
from tidings.providers.catalog import ADAPTERS
from tidings.providers.outcomes import Accepted, Rejected
from tidings.providers.sendgrid import SendGridAdapter


def test_every_adapter_has_a_target_or_says_why_not() -> None:
    assert set(TARGETS) | set(SKIPPED) == set(ADAPTERS)
    assert not set(TARGETS) & set(SKIPPED)
    with pytest.raises(CanarySkipped, match="Vonage"):
        targets_for("vonage")


def test_twilio_uses_the_test_credentials_and_the_magic_number() -> None:
    [target] = targets_for("twilio")
    live = {"account_sid": "AC-live", "auth_token": "live", "messaging_service_sid": "MG1"}
    with pytest.raises(CanarySkipped, match="TIDINGS_TWILIO_TEST_ACCOUNT_SID"):
        with_test_settings("twilio", target, live)
    test = {"test_account_sid": "AC-test", "test_auth_token": "t"}
    settings = with_test_settings("twilio", target, live | test)
    assert settings == {
        "account_sid": "AC-test",
        "auth_token": "t",
        "from": TWILIO_MAGIC_VALID,
        **test,
    }
    assert target.message().to == TWILIO_MAGIC_VALID


def test_postmark_sends_with_the_test_token() -> None:
    [target] = targets_for("postmark")
    settings = with_test_settings("postmark", target, {"server_token": "live", "from": "a@b.test"})
    assert settings["server_token"] == POSTMARK_TEST_TOKEN


def _sendgrid(status: int, seen: list[httpx.Request]) -> SendGridAdapter:
    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, json={} if status == 200 else {"errors": [{"field": "x"}]})

    client = httpx.Client(base_url="https://sendgrid.test", transport=httpx.MockTransport(answer))
    return SendGridAdapter("key", sender="ops@example.com", client=client)


def test_sendgrid_sends_in_sandbox_mode_and_reads_its_200() -> None:
    [target] = targets_for("sendgrid")
    seen: list[httpx.Request] = []
    assert isinstance(send_canary(_sendgrid(200, seen), target, "k"), Accepted)
    body = json.loads(seen[0].content)
    assert body["mail_settings"] == {"sandbox_mode": {"enable": True}}
    assert isinstance(send_canary(_sendgrid(400, seen), target, "k"), Rejected)
