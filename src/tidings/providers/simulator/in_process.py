"""The simulator adapter in process: the HTTP adapter over a `SimulatorCore`.

It shares every step but the transport: httpx's network transport is swapped
for `CoreTransport`, which calls the core directly. So the request building,
response parsing and error boundary under test are the same code the HTTP
adapter runs, with zero network and zero latency.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlencode

import httpx

from tidings.providers.base import HttpRequest
from tidings.providers.messages import AttachmentLoader, WebhookRequest
from tidings.providers.simulator import SimulatorCore
from tidings.providers.simulator.adapter import SimulatorAdapter
from tidings.providers.simulator.core import LookupFailed, NotSupported
from tidings.providers.simulator.receipts import render
from tidings.providers.simulator.wire_infrai import InfraiTransport, is_infrai_path
from tidings.providers.simulator.wire_postmark import PostmarkTransport, is_postmark_path
from tidings.providers.simulator.wire_sendgrid import SendGridTransport, is_sendgrid_path
from tidings.providers.simulator.wire_twilio import TwilioTransport, is_twilio_path
from tidings.providers.simulator.wire_vonage import VonageTransport, is_vonage_path

IN_PROCESS_URL = "http://simulator.in-process"
SEND_PATHS = {"/sms/send": "sms", "/email/send": "email"}


class CoreTransport(httpx.BaseTransport):
    """An httpx transport answering from a `SimulatorCore` in this process."""

    def __init__(self, core: SimulatorCore, *, honor_latency: bool = False):
        self._core = core
        self._honor_latency = honor_latency
        # The core speaks Twilio's, Postmark's, SendGrid's, Vonage's and
        # Infrai's own wires too, for the real adapters.
        self._twilio = TwilioTransport(core)
        self._postmark = PostmarkTransport(core)
        self._sendgrid = SendGridTransport(core)
        self._vonage = VonageTransport(core)
        self._infrai = InfraiTransport(core)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if is_twilio_path(path):
            return self._twilio.handle_request(request)
        if is_postmark_path(request.method, path):
            return self._postmark.handle_request(request)
        if is_sendgrid_path(request.method, path):
            return self._sendgrid.handle_request(request)
        if is_vonage_path(request.method, path):
            return self._vonage.handle_request(request)
        if is_infrai_path(request.method, path):
            return self._infrai.handle_request(request)
        if request.method == "POST" and path in SEND_PATHS:
            return self.send(SEND_PATHS[path], json.loads(request.content), request)
        if request.method == "GET" and path == "/_config":
            return httpx.Response(200, json=self._core.config.model_dump())
        try:
            return self._look_up(request)
        except NotSupported as exc:
            return httpx.Response(501, json={"code": "NOT_SUPPORTED", "detail": str(exc)})
        except LookupFailed:
            return httpx.Response(500, json={"code": "PROVIDER_ERROR"})

    def _look_up(self, request: httpx.Request) -> httpx.Response:
        path, params = request.url.path, request.url.params
        found = None
        if request.method == "GET" and path == "/messages":
            found = self._core.find_by_key(params.get("idempotency_key", ""))
        elif request.method == "GET" and path.startswith("/messages/"):
            found = self._core.lookup(unquote(path.removeprefix("/messages/")))
        elif request.method == "GET" and path.endswith("/messages"):
            channel = path.strip("/").split("/")[0]
            if "reference" in params:
                listed = self._core.find_by_reference(channel, params["reference"])
            else:
                since, until = float(params["sent_after"]), float(params["sent_before"])
                listed = self._core.search(channel, params["to"], since, until)
            return httpx.Response(200, json={"messages": listed})
        return httpx.Response(200, json=found) if found else httpx.Response(404, json={})

    def send(self, channel: str, body: Any, request: httpx.Request | None = None) -> httpx.Response:
        """The core's answer to a send whose JSON body is `body`."""
        reply = self._core.send(channel, body)
        if self._honor_latency:
            time.sleep(reply.latency_s)
        if reply.stall_s:
            # The core accepted and recorded it; the caller just never hears back.
            raise httpx.ReadTimeout("simulated stall after accept", request=request)
        return httpx.Response(reply.status_code, json=reply.body, headers=reply.headers)


class InProcessSimulatorAdapter(SimulatorAdapter):
    """The simulator adapter wired straight to a core: no sockets, no latency."""

    def __init__(
        self,
        core: SimulatorCore,
        *,
        webhook_secret: str | None = None,
        attachment_loader: AttachmentLoader | None = None,
        honor_latency: bool = False,
        clock: Callable[[], float] = time.time,
        profile: str | None = None,
    ):
        transport = CoreTransport(core, honor_latency=honor_latency)
        client = httpx.Client(base_url=IN_PROCESS_URL, transport=transport)
        super().__init__(
            IN_PROCESS_URL,
            webhook_secret,
            client=client,
            attachment_loader=attachment_loader,
            clock=clock,
            # None: learned from the core, as a worker learns it from the
            # simulator it talks to (its `/_config`).
            profile=profile,
        )
        self.core = core
        self._transport = transport

    def transmit(self, request: HttpRequest) -> httpx.Response:
        channel = SEND_PATHS.get(request.path) if request.method == "POST" else None
        if channel and request.data is None and not request.params:
            # A send's body goes to the core as the wire would carry it (JSON
            # through and back: a copy, and an error for what JSON cannot
            # hold) without an httpx.Request around it, whose building is a
            # visible share of a dispatch's Python time (docs/benchmarks.md,
            # "Measurements behind the code"). Its answer is the same
            # httpx.Response the HTTP adapter reads.
            response = self._transport.send(channel, json.loads(json.dumps(request.json)))
            response.read()
            return response
        # The same request objects the HTTP adapter builds, handed straight
        # to the transport: a client's cookies, auth, redirects and hooks
        # have nothing to do in process.
        built = httpx.Request(
            request.method,
            IN_PROCESS_URL + request.path,
            json=request.json,
            data=request.data,
            params=request.params,
            headers=request.headers,
        )
        response = self._transport.handle_request(built)
        response.request = built
        response.read()
        return response

    def _secret(self) -> str:
        # Without an explicit secret, follow the core's config as it changes.
        return self._webhook_secret or self.core.config.webhook_secret

    def due_webhooks(self) -> list[WebhookRequest]:
        """Receipts due now, signed as the simulator would POST them (benchmarks)."""
        requests = []
        for receipt in self.core.take_due_receipts():
            query = urlencode(receipt.query)
            stamp = int(self._clock())
            headers, body = render(receipt.event, self._secret(), stamp, query, receipt.profile)
            url = IN_PROCESS_URL + "/webhook" + (f"?{query}" if query else "")
            requests.append(WebhookRequest("POST", url, headers, body, dict(receipt.query)))
            self.core.mark(receipt, "delivered")
        return requests
