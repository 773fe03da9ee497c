"""The real adapters over the simulator's own wires of their providers.

Where the simulator speaks a profile's provider's protocol
(providers/simulator/wire_*.py), a worker and an API are configured as for
that provider (`TIDINGS_SMS_PROVIDER=twilio`, `TIDINGS_TWILIO_*`...) with
the simulator as its base URL: the real adapter builds each request, reads
each answer and checks each receipt's signature, unchanged. The simulator is
told `wire: true` and posts its receipts, signed its provider's way, to
that provider's webhook route (`/v1/webhooks/<provider>`).

The simulator's webhook secret is every credential of the simulated
account (wire_*.py `account_of`/`server_of`), so one secret configures both
sides.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from tidings.domain.keys import intent_of_attempt_key
from tidings.providers.correlation import expand, unescape_tag
from tidings.providers.simulator import SimulatorConfig
from tidings.providers.simulator.profiles import PROFILES, by_channel
from tidings.providers.simulator.wire_aws import account_of as aws_account
from tidings.providers.simulator.wire_aws_events import cert_url
from tidings.providers.simulator.wire_infrai import account_of as infrai_account
from tidings.providers.simulator.wire_postmark import server_of
from tidings.providers.simulator.wire_sendgrid import account_of
from tidings.providers.simulator.wire_twilio import account_of as twilio_account
from tidings.providers.simulator.wire_vonage import account_of as vonage_account

# The profiles whose provider's own wire the simulator speaks, and the
# channel each provider's adapter sends.
WIRED = {"twilio": "sms", "postmark": "email", "sendgrid": "email", "vonage": "sms"}
# AWS's three (wire_aws.py): one simulated account, its events (SES's and
# End User Messaging SMS's; SNS posts none) in SNS envelopes.
AWS_WIRED = {"ses": "email", "sns": "sms", "aws_sms": "sms"}
WIRED |= AWS_WIRED
# Wired profiles whose provider's request has no field for our reference
# (SNS Publish: providers/sns.py): the simulator's ledger names their sends
# by a key of the request's own, so a send is tied to its attempt only by
# the message id the attempt recorded, and not at all when its answer was lost.
KEYLESS = frozenset({"sns"})
# Infrai sends both channels through one adapter; its e-mail is the channel
# with a lookup, so the one the crash matrices play (tests/profile_matrix.py).
WIRED["infrai"] = "email"
SMS_SENDER = "+15559990000"
EMAIL_SENDER = "tidings@example.com"


def is_wired(profile: str) -> bool:
    return profile in WIRED


def webhook_url(api_base: str, profile: str) -> str:
    """Where the simulator posts receipts: the provider's own webhook route
    where it speaks the provider's wire, the simulator's otherwise."""
    route = profile if is_wired(profile) else "simulator"
    return f"{api_base.rstrip('/')}/v1/webhooks/{route}"


def adapter_env(profile: str, sim_url: str, secret: str, hook: str) -> dict[str, str]:
    """The environment of a worker or API using `profile`'s real adapter
    against the simulator at `sim_url` (`TIDINGS_SIMULATOR_URL` emptied, so
    the provider settings decide). `hook`: the receipts' URL."""
    config = SimulatorConfig(profile=profile, webhook_secret=secret, wire=True)
    env = {"TIDINGS_SIMULATOR_URL": "", f"TIDINGS_{WIRED[profile].upper()}_PROVIDER": profile}
    if profile in AWS_WIRED:
        return env | aws_env(profile, config, sim_url)
    if profile == "twilio":
        twilio = twilio_account(config)
        env |= {
            "TIDINGS_TWILIO_ACCOUNT_SID": twilio.account_sid,
            "TIDINGS_TWILIO_AUTH_TOKEN": twilio.auth_token,
            "TIDINGS_TWILIO_FROM": SMS_SENDER,
            "TIDINGS_TWILIO_STATUS_CALLBACK": hook,
            "TIDINGS_TWILIO_BASE_URL": sim_url,
        }
    elif profile == "postmark":
        server = server_of(config)
        env |= {
            "TIDINGS_POSTMARK_SERVER_TOKEN": server.server_token,
            "TIDINGS_POSTMARK_FROM": EMAIL_SENDER,
            "TIDINGS_POSTMARK_WEBHOOK_USERNAME": server.webhook_user,
            "TIDINGS_POSTMARK_WEBHOOK_PASSWORD": server.webhook_password,
            "TIDINGS_POSTMARK_BASE_URL": sim_url,
        }
    elif profile == "sendgrid":
        env |= {
            "TIDINGS_SENDGRID_API_KEY": secret,
            "TIDINGS_SENDGRID_FROM": EMAIL_SENDER,
            "TIDINGS_SENDGRID_WEBHOOK_PUBLIC_KEY": account_of(config).public_key(),
            "TIDINGS_SENDGRID_BASE_URL": sim_url,
        }
    elif profile == "vonage":
        vonage = vonage_account(config)
        env |= {
            "TIDINGS_VONAGE_API_KEY": vonage.api_key,
            "TIDINGS_VONAGE_API_SECRET": vonage.api_secret,
            "TIDINGS_VONAGE_FROM": vonage.sender_id,
            "TIDINGS_VONAGE_SIGNATURE_SECRET": vonage.signature_secret,
            "TIDINGS_VONAGE_SIGNATURE_METHOD": vonage.signature_method,
            "TIDINGS_VONAGE_CALLBACK_URL": hook,
            "TIDINGS_VONAGE_BASE_URL": sim_url,
        }
    elif profile == "infrai":
        # One adapter, one key for both channels; Infrai posts no receipts,
        # so `hook` is unused (wire_infrai.py).
        env |= {f"TIDINGS_{c.upper()}_PROVIDER": "infrai" for c in PROFILES[profile].channels}
        env |= {
            "TIDINGS_INFRAI_API_KEY": infrai_account(config).api_key,
            "TIDINGS_INFRAI_FROM": EMAIL_SENDER,
            "TIDINGS_INFRAI_SMS_FROM": SMS_SENDER,
            "TIDINGS_INFRAI_BASE_URL": sim_url,
        }
    return env


def aws_env(profile: str, config: SimulatorConfig, sim_url: str) -> dict[str, str]:
    """The AWS adapter `profile` (ses, sns, aws_sms) as an AWS account's:
    boto3 pointed at the simulator, signing with the simulated account's
    keys; SES and SMS events trusted from the simulator's SNS certificate
    (served at `sim_url`, the simulator's own public URL) and topic alone.
    The receipts' URL is the webhook's, set in the simulator: SNS, not the
    request, decides where events go."""
    aws = aws_account(config)
    name = f"TIDINGS_{profile.upper()}"
    env = {
        f"{name}_REGION": aws.region,
        f"{name}_ACCESS_KEY_ID": aws.access_key_id,
        f"{name}_SECRET_ACCESS_KEY": aws.secret_access_key,
        f"{name}_BASE_URL": sim_url,
    }
    if profile == "ses":
        env[f"{name}_FROM"] = EMAIL_SENDER
    else:
        env[f"{name}_FROM"] = aws.origination_number
    if profile in ("ses", "aws_sms"):
        served = config.updated({"public_url": sim_url})
        env |= {
            f"{name}_CONFIGURATION_SET": "tidings",
            f"{name}_SNS_TOPIC_ARNS": aws.topic_arn,
            f"{name}_SNS_TRUSTED_CERT_URLS": cert_url(served),
        }
    return env


def channels_env(spec: str, sim_url: str, secret: str, hook: str) -> dict[str, str]:
    """The environment of a worker or API for a simulator playing `spec`
    (`twilio`, or `sms=NAME,email=NAME`): each channel whose profile has a
    wire on its provider's real adapter, any other on the simulator adapter
    (the registered `simulator` provider, playing `spec`). One webhook
    secret for all."""
    env: dict[str, str] = {
        "TIDINGS_SIMULATOR_URL": "",
        "TIDINGS_SIMULATOR_BASE_URL": sim_url,
        "TIDINGS_SIMULATOR_PROFILE": spec,
        "TIDINGS_SIMULATOR_WEBHOOK_SECRET": secret,
    }
    for channel, played in by_channel(spec).items():
        if is_wired(played.name):
            env |= adapter_env(played.name, sim_url, secret, hook)
        else:
            env[f"TIDINGS_{channel.upper()}_PROVIDER"] = "simulator"
    return env


def wired_in(spec: str) -> set[str]:
    """The providers whose own wire a simulator playing `spec` speaks."""
    return {p.name for p in by_channel(spec).values() if is_wired(p.name)}


def receiver_of(headers: Mapping[str, str], body: bytes = b"") -> str:
    """The webhook route (`/v1/webhooks/<name>`) of a receipt the simulator
    posted, from how it is signed: the simulator's own header, Twilio's
    signature, SendGrid's signed event webhook, Postmark's Basic
    credentials, an SNS envelope (SES's event or End User Messaging SMS's,
    told apart by the event in `body`); Vonage signs inside its body."""
    names = {k.lower() for k in headers}
    if "x-simulator-signature" in names:
        return "simulator"
    if "x-amz-sns-message-type" in names:
        return _sns_receiver(body)
    if "x-twilio-signature" in names:
        return "twilio"
    if "x-twilio-email-event-webhook-signature" in names:
        return "sendgrid"
    if "authorization" in names:
        return "postmark"
    return "vonage"


def _sns_receiver(body: bytes) -> str:
    """Whose event an SNS envelope carries: SES's have a `mail` object
    (wire_aws_events.py), End User Messaging SMS's do not."""
    try:
        event = json.loads(json.loads(body)["Message"])
    except (ValueError, KeyError, TypeError):
        return "ses"  # unreadable: either route refuses it the same way
    return "ses" if isinstance(event, dict) and "mail" in event else "aws_sms"


def ours(carried: str) -> str:
    """Our attempt key as a provider's wire carried it into the simulator's
    ledger: Vonage's client-ref compacts it, SES's tag escapes it
    (providers/correlation.py); anything else as it is."""
    unescaped = unescape_tag(carried)
    if unescaped is not None and intent_of_attempt_key(unescaped) is not None:
        return unescaped
    return expand(carried) or carried


def every_wire_env(sim_url: str, secret: str, hook: str) -> dict[str, str]:
    """The settings of every provider whose wire the simulator speaks,
    choosing none: a process whose channel moved from one to another (a
    soak's profile switch) still builds the old one's adapter for the
    attempts in flight there (providers/accounts.py)."""
    env: dict[str, str] = {}
    for name in WIRED:
        own = f"TIDINGS_{name.upper()}_"
        env |= {
            k: v for k, v in adapter_env(name, sim_url, secret, hook).items() if k.startswith(own)
        }
    return env
