"""The Twilio canary (providers/canary_targets.py) against Twilio's own
published description, served by Prism: the request made with the test
credentials and the magic From number is one Twilio's contract accepts."""

from __future__ import annotations

from datetime import UTC, datetime

from tidings.dispatch.canary import send_round
from tidings.providers.twilio import TwilioAdapter

from .twilio_peer import ACCOUNT, TOKEN

TEST_ACCOUNT = "AC" + "b" * 32


def _env(prism_url: str, **more: str) -> dict[str, str]:
    live = {
        "TIDINGS_TWILIO_ACCOUNT_SID": ACCOUNT,
        "TIDINGS_TWILIO_AUTH_TOKEN": TOKEN,
        "TIDINGS_TWILIO_MESSAGING_SERVICE_SID": "MG" + "c" * 32,
        "TIDINGS_TWILIO_BASE_URL": prism_url,
    }
    return live | more


def test_twilios_description_accepts_the_canary(prism_url: str) -> None:
    live = TwilioAdapter(ACCOUNT, TOKEN, from_number="+15550009999", base_url=prism_url)
    env = _env(
        prism_url,
        TIDINGS_TWILIO_TEST_ACCOUNT_SID=TEST_ACCOUNT,
        TIDINGS_TWILIO_TEST_AUTH_TOKEN="test-token",
    )
    found = send_round({"sms": live}, datetime.now(UTC), env)
    [result] = found.results
    assert (result.account, result.target, result.ok, result.code) == (
        "twilio",
        "twilio-magic-valid",
        True,
        "ACCEPTED",
    ), result.answer


def test_without_test_credentials_twilios_canary_is_skipped_not_failed(prism_url: str) -> None:
    live = TwilioAdapter(ACCOUNT, TOKEN, from_number="+15550009999", base_url=prism_url)
    found = send_round({"sms": live}, datetime.now(UTC), _env(prism_url))
    assert found.results == []
    assert "TIDINGS_TWILIO_TEST_ACCOUNT_SID" in found.skipped["twilio/sms"]
