"""Where each provider account's synthetic canary goes (issue #41 item 2).

A canary is a message with fixed synthetic text, sent through a provider
account's adapter to that provider's own official test destination, never
to a member. Each adapter declares its target here: the destination, a
name that is stored instead of it (`twilio-magic-valid`), and how the
provider is told it is a test (test credentials, a test token, a sandbox
flag). Adapters whose provider documents no test destination have none,
and say why in `SKIPPED`.

Per adapter (target name: how the provider knows it is a test; source):

* twilio, `twilio-magic-valid`: the account's *test* credentials
  (`TIDINGS_TWILIO_TEST_ACCOUNT_SID`, `TIDINGS_TWILIO_TEST_AUTH_TOKEN`) and
  the magic number `+15005550006`; nothing charged, no real phone reached,
  no status callback, and fetching the message is refused (403), so no
  receipt can be checked.
  https://www.twilio.com/docs/iam/test-credentials and
  https://www.twilio.com/docs/messaging/tutorials/automate-testing
* ses, `ses-simulator-success`: the mailbox simulator address
  `success@simulator.amazonses.com` (works in the sandbox and in
  production; limited by the maximum sending rate, not counted in the
  daily quota, billed like any e-mail; no status lookup: a delivery
  notification comes only through the account's event notifications).
  https://docs.aws.amazon.com/ses/latest/dg/send-an-email-from-console.html
  https://docs.aws.amazon.com/ses/latest/DeveloperGuide/mailbox-simulator.html
* postmark, `postmark-api-test`: the server token `POSTMARK_API_TEST`,
  any address; validated, never delivered.
  https://postmarkapp.com/developer/user-guide/sending-with-api
* sendgrid, `sendgrid-sandbox`: `mail_settings.sandbox_mode.enable = true`
  (a JSON boolean); validated, never delivered, answered 200 (not 202),
  no events. https://www.twilio.com/docs/sendgrid/for-developers/sending-email/sandbox-mode
* simulator, `simulator-success`: a destination no magic suffix or local
  part matches (providers/simulator/magic.py); its receipt is looked up.

Twilio's page names `+15005550006` as the magic *From* number that
succeeds; every To number but its listed failing magic numbers is valid,
so the canary sends from and to `+15005550006`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from tidings.providers import settings as cfg
from tidings.providers.base import HttpRequest, ProviderAdapter
from tidings.providers.errors import ProviderConfigError
from tidings.providers.messages import Channel, OutboundMessage
from tidings.providers.outcomes import Accepted, SendResult

CANARY_TEXT = "tidings canary: synthetic check, not a member message."
CANARY_SUBJECT = "tidings canary"
TWILIO_MAGIC_VALID = "+15005550006"
POSTMARK_TEST_TOKEN = "POSTMARK_API_TEST"


@dataclass(frozen=True)
class CanaryTarget:
    name: str  # stored and shown instead of the destination
    channel: Channel
    to: str = field(repr=False)
    sender: str | None = None
    # The adapter is rebuilt from its TIDINGS_<NAME>_* settings with these
    # replaced: fixed test values, and test credentials, each key K read
    # from the account's own setting `test_K` (TIDINGS_<NAME>_TEST_K); the
    # canary is skipped while one is unset.
    test_settings: Mapping[str, str] = field(default_factory=dict)
    test_credentials: Callable[[Mapping[str, Any]], Mapping[str, str | None]] | None = None
    drop_settings: tuple[str, ...] = ()
    sandbox: bool = False  # SendGrid's sandbox_mode flag on the request
    check_receipt: bool = False  # look the message up once it is accepted

    def message(self) -> OutboundMessage:
        subject = CANARY_SUBJECT if self.channel == "email" else None
        return OutboundMessage(self.channel, self.to, CANARY_TEXT, subject, self.sender)


TARGETS: dict[str, tuple[CanaryTarget, ...]] = {
    "twilio": (
        CanaryTarget(
            "twilio-magic-valid",
            "sms",
            TWILIO_MAGIC_VALID,
            test_settings={"from": TWILIO_MAGIC_VALID},
            test_credentials=lambda settings: {
                "account_sid": cfg.optional(settings, "test_account_sid"),
                "auth_token": cfg.optional(settings, "test_auth_token"),
            },
            # Test credentials cannot use the live account's resources.
            drop_settings=("messaging_service_sid", "api_key_sid", "api_key_secret"),
        ),
    ),
    "ses": (CanaryTarget("ses-simulator-success", "email", "success@simulator.amazonses.com"),),
    "postmark": (
        CanaryTarget(
            "postmark-api-test",
            "email",
            "canary@example.com",
            test_settings={"server_token": POSTMARK_TEST_TOKEN},
        ),
    ),
    "sendgrid": (CanaryTarget("sendgrid-sandbox", "email", "canary@example.com", sandbox=True),),
    "simulator": (
        CanaryTarget("simulator-success", "sms", "+15550100777", check_receipt=True),
        CanaryTarget("simulator-success", "email", "canary@simulator.test", check_receipt=True),
    ),
}

SKIPPED: dict[str, str] = {
    "vonage": "Vonage documents no test destination or test credentials for the SMS API",
    "aws_sms": "AWS End User Messaging SMS has simulator numbers only for some countries "
    "and origination identities; none is universal, so none is assumed",
    "sns": "Amazon SNS documents no SMS test destination",
    "smtp": "an SMTP relay has no standard test destination",
    "infrai": "Infrai's public docs name no test destination",
}


class CanarySkipped(Exception):
    """This account has no canary: the reason says why."""


def targets_for(account: str) -> tuple[CanaryTarget, ...]:
    if account in TARGETS:
        return TARGETS[account]
    raise CanarySkipped(SKIPPED.get(account, f"no canary target declared for {account}"))


def with_test_settings(
    account: str, target: CanaryTarget, current: Mapping[str, str]
) -> dict[str, str]:
    """The account's settings (`current`, from its TIDINGS_<NAME>_*
    variables) with the target's test values and credentials in place."""
    settings = {k: v for k, v in current.items() if k not in target.drop_settings}
    settings.update(target.test_settings)
    credentials = target.test_credentials(current) if target.test_credentials else {}
    for key, found in credentials.items():
        if not found:
            variable = f"TIDINGS_{account.upper()}_TEST_{key.upper()}"
            raise CanarySkipped(f"{variable} is not set: no test credentials")
        settings[key] = found
    return settings


def send_canary(adapter: ProviderAdapter, target: CanaryTarget, key: str) -> SendResult:
    """One synthetic send through the adapter's own steps."""
    message = target.message()
    if not target.sandbox:
        return adapter.send(message, key)
    request = adapter.build_request(message, key)
    if not isinstance(request, HttpRequest) or not isinstance(request.json, dict):
        raise ProviderConfigError(f"{adapter.name} has no JSON request for a sandbox flag")
    payload: dict[str, Any] = {**request.json, "mail_settings": {"sandbox_mode": {"enable": True}}}
    response: httpx.Response = adapter.transmit(replace(request, json=payload))
    if response.status_code == 200:  # sandbox mode answers 200 where a real send answers 202
        return Accepted("sandbox", raw_status="sandbox")
    return adapter.parse_response(response)
