"""Every provider tidings ships an adapter for, in one table.

Per provider: its name (in settings, webhook paths and the simulator's
`--profile`), the module that registers its adapter and the adapter's
class, the channels it sends, the `TIDINGS_<NAME>_*` settings it reads
(which are required, which are secrets), the simulator profile that plays
it, and the row that documents it in docs/providers.md. The registry, the
settings, the simulator's profiles, the CLI help and the test matrices read
it; `tests/unit/test_provider_catalog.py` checks that the adapters, the
profiles and docs/providers.md agree with it.

Pure data: importing it imports no adapter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

SMS: Final = frozenset({"sms"})
EMAIL: Final = frozenset({"email"})
BOTH: Final = SMS | EMAIL


class Transport(StrEnum):
    """How an adapter reaches its provider, which decides the settings it
    shares with the others of its kind (docs/providers.md, "Configuration")."""

    HTTP = "http"  # reads `base_url`
    AWS = "aws"  # reads `base_url` and the AWS credentials
    SMTP = "smtp"  # its own protocol: neither


# Read by every adapter of a transport, documented once for all of them.
COMMON_SETTINGS: Final[Mapping[Transport, tuple[str, ...]]] = {
    Transport.HTTP: ("timeout", "base_url"),
    Transport.AWS: (
        "timeout",
        "base_url",
        "endpoint_url",
        "access_key_id",
        "secret_access_key",
        "session_token",
    ),
    Transport.SMTP: ("timeout",),
}


@dataclass(frozen=True)
class Setting:
    key: str  # the settings key; its variable is TIDINGS_<NAME>_<KEY>
    required: bool = False
    secret: bool = False  # a credential: never in a repr, a log or an error


@dataclass(frozen=True)
class Provider:
    name: str
    module: str  # imported, it registers the adapter's factory
    adapter_class: str
    channels: frozenset[str]
    transport: Transport
    settings: tuple[Setting, ...]
    # The simulator profile that offers what this provider offers, if any.
    profile: str | None
    # The provider's row in docs/providers.md, "What each adapter can do";
    # its set-up is the section `{#NAME}` of docs/guides/providers.md.
    docs_title: str

    def variable(self, key: str) -> str:
        return f"TIDINGS_{self.name.upper()}_{key.upper()}"


def _keys(
    *names: str, required: tuple[str, ...] = (), secret: tuple[str, ...] = ()
) -> tuple[Setting, ...]:
    return tuple(Setting(n, n in required, n in secret) for n in names)


_SNS_EVENTS = ("sns_topic_arns", "sns_max_age_seconds", "sns_trusted_cert_urls")

PROVIDERS: Final[Mapping[str, Provider]] = {
    p.name: p
    for p in (
        Provider(
            "twilio",
            "tidings.providers.twilio",
            "TwilioAdapter",
            SMS,
            Transport.HTTP,
            _keys(
                "account_sid",
                "auth_token",
                "api_key_sid",
                "api_key_secret",
                "messaging_service_sid",
                "from",
                "status_callback",
                # The account's test credentials: the synthetic canary's alone
                # (providers/canary_targets.py), never a member's message.
                "test_account_sid",
                "test_auth_token",
                required=("account_sid", "auth_token"),
                secret=("auth_token", "api_key_secret", "test_auth_token"),
            ),
            profile="twilio",
            docs_title="Twilio Messaging (SMS)",
        ),
        Provider(
            "aws_sms",
            "tidings.providers.aws_sms",
            "AwsSmsAdapter",
            SMS,
            Transport.AWS,
            _keys(
                "region",
                "from",
                "configuration_set",
                "message_type",
                *_SNS_EVENTS,
                required=("region",),
            ),
            profile="aws_sms",
            docs_title="AWS End User Messaging SMS",
        ),
        Provider(
            "sns",
            "tidings.providers.sns",
            "SnsSmsAdapter",
            SMS,
            Transport.AWS,
            _keys("region", "sender_id", "from", "sms_type", "check_opt_out", required=("region",)),
            profile="sns",
            docs_title="Amazon SNS (SMS)",
        ),
        Provider(
            "ses",
            "tidings.providers.ses",
            "SesAdapter",
            EMAIL,
            Transport.AWS,
            _keys("region", "from", "configuration_set", *_SNS_EVENTS, required=("region", "from")),
            profile="ses",
            docs_title="Amazon SES v2 (e-mail)",
        ),
        Provider(
            "sendgrid",
            "tidings.providers.sendgrid",
            "SendGridAdapter",
            EMAIL,
            Transport.HTTP,
            _keys(
                "api_key",
                "from",
                "webhook_public_key",
                "signature_tolerance_s",
                required=("api_key",),
                secret=("api_key",),
            ),
            profile="sendgrid",
            docs_title="SendGrid (e-mail)",
        ),
        Provider(
            "postmark",
            "tidings.providers.postmark",
            "PostmarkAdapter",
            EMAIL,
            Transport.HTTP,
            _keys(
                "server_token",
                "from",
                "message_stream",
                "broadcast_stream",
                "webhook_username",
                "webhook_password",
                required=("server_token",),
                secret=("server_token", "webhook_password"),
            ),
            profile="postmark",
            docs_title="Postmark (e-mail)",
        ),
        Provider(
            "vonage",
            "tidings.providers.vonage",
            "VonageAdapter",
            SMS,
            Transport.HTTP,
            _keys(
                "api_key",
                "api_secret",
                "from",
                "signature_secret",
                "signature_method",
                "signature_tolerance_s",
                "callback_url",
                required=("api_key", "api_secret"),
                secret=("api_secret", "signature_secret"),
            ),
            profile="vonage",
            docs_title="Vonage SMS API",
        ),
        Provider(
            "smtp",
            "tidings.providers.smtp",
            "SmtpAdapter",
            EMAIL,
            Transport.SMTP,
            _keys(
                "host",
                "port",
                "from",
                "username",
                "password",
                "starttls",
                "implicit_tls",
                "message_id_domain",
                required=("host",),
                secret=("password",),
            ),
            profile=None,  # the simulator speaks no SMTP; tests use a real aiosmtpd server
            docs_title="SMTP relay (e-mail)",
        ),
        Provider(
            "infrai",
            "tidings.providers.infrai",
            "InfraiAdapter",
            BOTH,
            Transport.HTTP,
            _keys(
                "api_key",
                "base_url",
                "from",
                "sms_from",
                required=("api_key", "base_url"),
                secret=("api_key",),
            ),
            profile="infrai",
            docs_title="Infrai (e-mail + SMS)",
        ),
    )
}

# The simulator is an adapter too, but no provider: it is documented with
# the simulator (docs/testing.md), and plays the providers above.
SIMULATOR: Final = Provider(
    "simulator",
    "tidings.providers.simulator.adapter",
    "SimulatorAdapter",
    BOTH,
    Transport.HTTP,
    _keys("url", "webhook_secret", "profile", secret=("webhook_secret",)),
    profile=None,
    docs_title="",
)

# Every adapter by name, the simulator first.
ADAPTERS: Final[Mapping[str, Provider]] = {SIMULATOR.name: SIMULATOR, **PROVIDERS}


def played_profiles() -> tuple[str, ...]:
    """The simulator profiles that play a real provider, in catalog order."""
    return tuple(p.profile for p in PROVIDERS.values() if p.profile is not None)
