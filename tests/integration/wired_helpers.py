"""A wired profile's real adapter over an in-process simulator core, and its
receipts as that provider posts them: what harness/wires.py sets up for
processes, for tests that drive a worker in this process."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from harness.wires import AWS_WIRED, EMAIL_SENDER, SMS_SENDER, WIRED

from tidings.providers.base import ProviderAdapter
from tidings.providers.infrai import InfraiAdapter
from tidings.providers.messages import WebhookRequest
from tidings.providers.postmark import PostmarkAdapter
from tidings.providers.sendgrid import SendGridAdapter
from tidings.providers.simulator import (
    SimulatorCore,
    wire_infrai,
    wire_postmark,
    wire_sendgrid,
    wire_twilio,
    wire_vonage,
)
from tidings.providers.simulator.in_process import CoreTransport
from tidings.providers.simulator.receipts import ReceiptDispatcher
from tidings.providers.twilio import TwilioAdapter
from tidings.providers.vonage import VonageAdapter

BASE = "http://simulator.in-process"
# The wires an adapter reaches in this process, through httpx's transport.
# AWS's adapters are boto3 clients, which need the simulator served over
# HTTP: the crash profiles and the reliability run play them (harness/wires.py).
IN_PROCESS = {p: channel for p, channel in WIRED.items() if p not in AWS_WIRED}


def is_wired(profile: str) -> bool:
    return profile in IN_PROCESS


def real_adapter(profile: str, core: SimulatorCore, hook: str) -> ProviderAdapter:
    """`profile`'s provider's own adapter, its client answered by `core`'s
    wire of that provider (the core's config must say `wire: true`)."""
    client = httpx.Client(base_url=BASE, transport=CoreTransport(core))
    config = core.config
    if profile == "twilio":
        twilio = wire_twilio.account_of(config)
        return TwilioAdapter(
            twilio.account_sid,
            twilio.auth_token,
            from_number=SMS_SENDER,
            status_callback=hook,
            base_url=BASE,
            client=client,
        )
    if profile == "postmark":
        server = wire_postmark.server_of(config)
        return PostmarkAdapter(
            server.server_token,
            sender=EMAIL_SENDER,
            webhook_credentials=(server.webhook_user, server.webhook_password),
            base_url=BASE,
            client=client,
        )
    if profile == "sendgrid":
        sendgrid = wire_sendgrid.account_of(config)
        return SendGridAdapter(
            sendgrid.api_key,
            sender=EMAIL_SENDER,
            webhook_public_key=sendgrid.public_key(),
            base_url=BASE,
            client=client,
        )
    if profile == "vonage":
        vonage = wire_vonage.account_of(config)
        return VonageAdapter(
            vonage.api_key,
            vonage.api_secret,
            sender=vonage.sender_id,
            signature_secret=vonage.signature_secret,
            signature_method=vonage.signature_method,
            callback_url=hook,
            base_url=BASE,
            client=client,
        )
    if profile == "infrai":
        key = wire_infrai.account_of(config).api_key
        return InfraiAdapter(key, BASE, sender=EMAIL_SENDER, sms_sender=SMS_SENDER, client=client)
    raise ValueError(f"no wire for profile {profile!r}")


def posted_receipts(core: SimulatorCore, wall_clock: Callable[[], float]) -> list[WebhookRequest]:
    """The receipts due now, as the simulator's dispatcher would POST them
    (signed the provider's way), caught instead of sent."""
    caught: list[httpx.Request] = []

    def receive(request: httpx.Request) -> httpx.Response:
        request.read()
        caught.append(request)
        return httpx.Response(200)

    receiver = httpx.Client(transport=httpx.MockTransport(receive))
    ReceiptDispatcher(core, client=receiver, wall_clock=wall_clock).run_once()
    return [
        WebhookRequest("POST", str(r.url), dict(r.headers), r.content, dict(r.url.params))
        for r in caught
    ]
