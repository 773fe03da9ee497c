"""SendGrid and Vonage adapters against their providers' own published descriptions.

Stoplight Prism (scripts/install-prism) serves each vendored description
(tests/providers/peers/README.md) and validates every request the real
adapter builds: a request the description does not allow is answered 400
or 422 with Prism's list of violations, never the provider's success. The
descriptions' limits that live in prose rather than in the schema (Vonage's
`client-ref` of at most 40 characters) are read from the description too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs
from uuid import uuid4

import httpx
import pytest
import yaml

from tests.lanes import starts_processes
from tests.providers.twilio_peer import PEERS, serve_prism
from tidings.domain.keys import attempt_key
from tidings.providers.messages import OutboundMessage
from tidings.providers.outcomes import Accepted, Indeterminate
from tidings.providers.sendgrid import SendGridAdapter
from tidings.providers.vonage import VonageAdapter

SENDGRID_SPEC = PEERS / "sendgrid_v3.json"
VONAGE_SPEC = PEERS / "vonage_sms.yml"
# Vonage's description requires an 8-character key (NewMessage.api_key).
VONAGE_KEY, VONAGE_SECRET = "abcd1234", "api-secret-0123"


class ToPrism(httpx.BaseTransport):
    """Sends each request to Prism with the server's documented base path removed.

    Prism routes a description's paths without its server's base path
    (`basePath: /v3` for SendGrid, `https://rest.nexmo.com/sms` for Vonage);
    the rest of the request goes as the adapter built it. Every answer is kept.
    """

    def __init__(self, prism_url: str, base_path: str) -> None:
        self._prism = httpx.URL(prism_url)
        self._base = base_path
        self._inner = httpx.HTTPTransport()
        self.answers: list[httpx.Response] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        assert path.startswith(self._base + "/"), path
        request.url = request.url.copy_with(
            scheme=self._prism.scheme,
            host=self._prism.host,
            port=self._prism.port,
            path=path.removeprefix(self._base),
        )
        answer = self._inner.handle_request(request)
        answer.read()
        self.answers.append(answer)
        return answer

    def close(self) -> None:
        self._inner.close()


def request_violations(answer: httpx.Response) -> list[Any]:
    """What Prism found wrong with our request (its answers' own faults are not ours)."""
    found = json.loads(answer.headers.get("sl-violations", "[]"))
    if answer.status_code == 422 and "problem+json" in answer.headers.get("content-type", ""):
        found += answer.json().get("validation", [])
    return [v for v in found if v.get("location", [""])[0] != "response"]


@pytest.fixture(scope="module")
@starts_processes
def sendgrid_prism(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("prism-sendgrid")
    yield from serve_prism(corrected_sendgrid(tmp), tmp)


def corrected_sendgrid(tmp: Path) -> Path:
    """The vendored description's Mail Send, with its one known contradiction
    of SendGrid corrected here, in the open, so the file stays as published.

    oai.json types the top-level `custom_args` as a string while its own
    text says "Key/value pairs must be strings" (and the personalization's
    `custom_args` is an object); SendGrid's helper sends an object
    (sendgrid/sendgrid-nodejs, docs/use-cases/kitchen-sink.md, `customArgs`),
    and the API refuses a string: "Invalid type. Expected: object, given:
    string." (field custom_args, reported on Stack Exchange by higgmp).
    """
    spec = json.loads(SENDGRID_SPEC.read_text())
    [body] = spec["paths"]["/mail/send"]["post"]["parameters"]
    custom_args = body["schema"]["properties"]["custom_args"]
    assert custom_args["type"] == "string"  # the flaw is still there: still corrected
    custom_args["type"] = "object"
    # Only the operation under test is served: Prism starts in seconds, not half a minute.
    spec["paths"] = {"/mail/send": spec["paths"]["/mail/send"]}
    path = tmp / "sendgrid_v3.corrected.json"
    path.write_text(json.dumps(spec))
    return path


@pytest.fixture(scope="module")
@starts_processes
def vonage_prism(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from serve_prism(VONAGE_SPEC, tmp_path_factory.mktemp("prism-vonage"))


# --- SendGrid -------------------------------------------------------------------------


def _sendgrid(prism_url: str) -> tuple[SendGridAdapter, ToPrism]:
    transport = ToPrism(prism_url, "/v3")
    client = httpx.Client(base_url="https://api.sendgrid.com", transport=transport)
    adapter = SendGridAdapter("SG.test-key", sender="notify@tidings.test", client=client)
    return adapter, transport


def test_sendgrids_description_accepts_our_send(sendgrid_prism: str) -> None:
    adapter, transport = _sendgrid(sendgrid_prism)
    message = OutboundMessage("email", "reader@example.org", "Your report is ready.", subject="Hi")
    result = adapter.send(message, attempt_key(uuid4(), 1))
    [answer] = transport.answers
    assert request_violations(answer) == []
    assert answer.status_code == 202
    # The description's 202 declares no X-Message-Id (SendGrid documents the
    # header on its pages, not in the description), so Prism sends none and
    # the adapter cannot name the message: probably taken, not refused.
    assert isinstance(result, Indeterminate)


def test_sendgrids_description_accepts_our_sandboxed_canary(sendgrid_prism: str) -> None:
    """The canary's sandbox flag (providers/canary_targets.py) is a shape
    SendGrid's own description accepts: `mail_settings.sandbox_mode.enable`,
    a boolean."""
    from tidings.providers.canary_targets import send_canary, targets_for

    adapter, transport = _sendgrid(sendgrid_prism)
    [target] = targets_for("sendgrid")
    send_canary(adapter, target, attempt_key(uuid4(), 1))
    [answer] = transport.answers
    assert request_violations(answer) == []
    sent = json.loads(answer.request.content)
    assert sent["mail_settings"] == {"sandbox_mode": {"enable": True}}


def test_sendgrids_description_is_really_validating(sendgrid_prism: str) -> None:
    answer = httpx.post(
        f"{sendgrid_prism}/mail/send",
        json={"from": {"email": "notify@tidings.test"}},
        headers={"Authorization": "Bearer SG.test-key"},
    )
    assert answer.status_code == 400
    assert any("personalizations" in v["message"] for v in request_violations(answer))


# --- Vonage ---------------------------------------------------------------------------


def _vonage(prism_url: str) -> tuple[VonageAdapter, ToPrism]:
    transport = ToPrism(prism_url, "/sms")
    client = httpx.Client(base_url="https://rest.nexmo.com", transport=transport)
    adapter = VonageAdapter(VONAGE_KEY, VONAGE_SECRET, client=client, sender="Tidings")
    return adapter, transport


def test_vonages_description_accepts_our_send(vonage_prism: str) -> None:
    adapter, transport = _vonage(vonage_prism)
    result = adapter.send(OutboundMessage("sms", "+447700900001", "hello"), "k-1")
    [answer] = transport.answers
    assert request_violations(answer) == []
    assert answer.status_code == 200
    # Prism answers with the description's own example of a sent message.
    assert isinstance(result, Accepted)
    assert result.provider_message_id == "0A0000000123ABCD1"


def test_vonages_description_is_really_validating(vonage_prism: str) -> None:
    answer = httpx.post(f"{vonage_prism}/json", data={"api_key": "short", "from": "T", "to": "44"})
    assert answer.status_code == 422
    assert {tuple(v["location"]) for v in request_violations(answer)} >= {
        ("body", "api_key"),
        ("body", "to"),
    }


def _client_ref_limit() -> int:
    schema = yaml.safe_load(VONAGE_SPEC.read_text())["components"]["schemas"]["NewMessage"]
    description = schema["properties"]["client-ref"]["description"]
    found = re.search(r"up to (\d+) characters", description)
    assert found, description
    return int(found.group(1))


def test_our_reference_fits_vonages_client_ref() -> None:
    """The limit is stated in the description's prose, so no schema check sees
    it: read it from there. A real attempt key, as the worker passes it."""
    assert _client_ref_limit() == 40
    sent: list[dict[str, list[str]]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(parse_qs(request.content.decode()))
        return httpx.Response(200, json={"message-count": "1", "messages": [{"status": "5"}]})

    client = httpx.Client(base_url="https://rest.nexmo.com", transport=httpx.MockTransport(answer))
    adapter = VonageAdapter(VONAGE_KEY, VONAGE_SECRET, client=client, sender="Tidings")
    adapter.send(OutboundMessage("sms", "+447700900001", "hello"), attempt_key(uuid4(), 12))
    [form] = sent
    assert len(form["client-ref"][0]) <= _client_ref_limit()
