"""The simulator adapters: the conformance suite over HTTP and in-process, then specifics."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.providers.conformance import AdapterConformance, Outcome, Signature
from tests.providers.support import Receiver, free_port, simulator_process
from tidings.providers.errors import InvalidSignature, ProviderConfigError, ProviderUnavailable
from tidings.providers.messages import AttachmentRef, OutboundMessage, WebhookRequest
from tidings.providers.outcomes import Accepted, Indeterminate, RejectCode, Retryable
from tidings.providers.registry import create, registered
from tidings.providers.simulator import DEFAULT_WEBHOOK_SECRET, SimulatorConfig, SimulatorCore
from tidings.providers.simulator.adapter import SimulatorAdapter
from tidings.providers.simulator.in_process import InProcessSimulatorAdapter
from tidings.providers.simulator.receipts import render, sign

# Receipts an hour away: statuses stay "accepted" until a test settles them.
PEER_CONFIG: dict[str, Any] = {
    "retry_after_seconds": 7,
    "receipt_delay_ms": 3_600_000,
    "timeout_stall_ms": 3_000,
}
SMS_SUFFIX = {
    "accept": "1234",
    "undeliverable": "0001",
    "rate_limit": "0429",
    "reject": "0000",
    "timeout": "0408",
}
EMAIL_LOCAL = {
    "accept": "member",
    "undeliverable": "bounce",
    "rate_limit": "ratelimit",
    "reject": "invalid",
    "timeout": "timeout",
}


class HttpControl:
    def __init__(self, base_url: str):
        self._http = httpx.Client(base_url=base_url, timeout=5.0)

    def ledger(self, key: str | None = None) -> list[dict[str, Any]]:
        params = {"idempotency_key": key} if key else {}
        return self._http.get("/_ledger", params=params).raise_for_status().json()

    def configure(self, **changes: Any) -> None:
        self._http.put("/_config", json=changes).raise_for_status()

    def advance(self, seconds: float) -> None:
        self._http.post("/_advance", json={"seconds": seconds}).raise_for_status()

    def reset(self) -> None:
        self._http.post("/_reset", params={"config": "true"}).raise_for_status()

    def close(self) -> None:
        self._http.close()


class CoreControl:
    def __init__(self, core: SimulatorCore):
        self.core = core

    def ledger(self, key: str | None = None) -> list[dict[str, Any]]:
        return self.core.ledger(key)

    def configure(self, **changes: Any) -> None:
        self.core.configure(changes)

    def advance(self, seconds: float) -> None:
        self.core.advance(seconds)


class SimulatorPeer:
    """PeerControl for the simulator: magic destinations stage each outcome."""

    retry_after_seconds = 7.0
    reject_code = RejectCode.INVALID_DESTINATION

    def __init__(self, control: HttpControl | CoreControl, secret: str):
        self._control = control
        self._secret = secret

    def message(self, outcome: Outcome, channel: str) -> OutboundMessage:
        tag = uuid.uuid4().hex[:8]
        if channel == "sms":
            to = f"+1555{int(tag, 16) % 10_000:04d}{SMS_SUFFIX[outcome]}"
        else:
            to = f"{EMAIL_LOCAL[outcome]}+{tag}@example.test"
        return OutboundMessage(channel, to, f"conformance body {tag}", subject="Hello")

    def undelivered_code(self, channel: str) -> RejectCode:
        return RejectCode.UNREACHABLE if channel == "sms" else RejectCode.BOUNCED

    def requests_recorded(self, idempotency_key: str) -> int:
        return len(self._control.ledger(idempotency_key))

    def settle(self) -> None:
        self._control.advance(2 * 3600)

    def webhook(
        self,
        provider_message_id: str,
        idempotency_key: str,
        raw_status: str,
        *,
        signature: Signature = "valid",
        destination: str | None = None,
    ) -> WebhookRequest:
        event = _event(provider_message_id, idempotency_key, raw_status, destination)
        secret = "not-the-secret" if signature == "wrong_secret" else self._secret
        headers, body = render(event, secret, int(time.time()))
        if signature == "missing":
            del headers["X-Simulator-Signature"]
        if signature == "tampered":
            body = body.replace(raw_status.encode(), b"failed")
        return WebhookRequest("POST", "http://tidings.test/v1/webhooks/simulator", headers, body)


def _event(pmid: str, key: str, status: str, destination: str | None) -> dict[str, Any]:
    # Byte-identical for the same (message, status): replays are real replays.
    event = {
        "event_id": "EV" + hashlib.sha256(f"{pmid}|{status}".encode()).hexdigest()[:32],
        "message_id": pmid,
        "idempotency_key": key,
        "status": status,
        "code": None,
        "occurred_at": "2030-01-02T03:04:05+00:00",
    }
    if destination is not None:
        event["to"] = destination
    return event


@pytest.fixture(scope="module")
def simulator_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with simulator_process(tmp_path_factory.mktemp("simulator")) as url:
        yield url


@pytest.fixture
def http_control(simulator_url: str) -> Iterator[HttpControl]:
    control = HttpControl(simulator_url)
    control.reset()
    control.configure(**PEER_CONFIG)
    yield control
    control.close()


class TestSimulatorOverHttp(AdapterConformance):
    @pytest.fixture
    def adapter(self, simulator_url: str) -> Iterator[SimulatorAdapter]:
        with SimulatorAdapter(simulator_url, DEFAULT_WEBHOOK_SECRET, timeout=1.0) as adapter:
            yield adapter

    @pytest.fixture
    def peer(self, http_control: HttpControl) -> SimulatorPeer:
        return SimulatorPeer(http_control, DEFAULT_WEBHOOK_SECRET)


class TestSimulatorInProcess(AdapterConformance):
    @pytest.fixture
    def core(self) -> SimulatorCore:
        return SimulatorCore(SimulatorConfig(**PEER_CONFIG))

    @pytest.fixture
    def adapter(self, core: SimulatorCore) -> Iterator[InProcessSimulatorAdapter]:
        with InProcessSimulatorAdapter(core) as adapter:
            yield adapter

    @pytest.fixture
    def peer(self, core: SimulatorCore) -> SimulatorPeer:
        return SimulatorPeer(CoreControl(core), core.config.webhook_secret)


# --- adapter specifics -------------------------------------------------------


def sms(to: str = "+15550001234", **kwargs: Any) -> OutboundMessage:
    return OutboundMessage("sms", to, "hello", **kwargs)


def test_connection_refused_is_retryable_and_lookups_are_unavailable() -> None:
    # Nothing listens on the port: the request certainly never reached anyone.
    with SimulatorAdapter(f"http://127.0.0.1:{free_port()}", timeout=1.0) as adapter:
        assert isinstance(adapter.send(sms(), "k"), Retryable)
        # ... but a failed lookup is never "not found", which would license a resend.
        with pytest.raises(ProviderUnavailable):
            adapter.find_by_key("k")
        with pytest.raises(ProviderUnavailable):
            adapter.status("SM1")


def test_http_500_is_indeterminate_and_reconciles_to_not_found(
    simulator_url: str, http_control: HttpControl
) -> None:
    with SimulatorAdapter(simulator_url, timeout=2.0) as adapter:
        result = adapter.send(sms("+15550000500"), "k-500")
        assert isinstance(result, Indeterminate)
        assert result.http_status == 500
        assert adapter.find_by_key("k-500") is None  # now a resend is safe
    assert [e["outcome"] for e in http_control.ledger("k-500")] == ["error_5xx"]


def test_unreadable_2xx_is_indeterminate_not_a_failure() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(201, text="<html>"))
    client = httpx.Client(base_url="http://sim.test", transport=transport)
    with SimulatorAdapter("http://sim.test", client=client) as adapter:
        assert isinstance(adapter.send(sms(), "k"), Indeterminate)


def test_attachments_are_fetched_at_send_time() -> None:
    ref = AttachmentRef("rep-1", 3, "report.pdf", "application/pdf", "s3://bucket/rep-1")
    loaded: list[AttachmentRef] = []

    def loader(r: AttachmentRef) -> bytes:
        loaded.append(r)
        return b"%PDF-1.7 report"

    message = OutboundMessage("email", "a@example.test", "see attached", attachments=(ref,))
    with InProcessSimulatorAdapter(SimulatorCore(), attachment_loader=loader) as adapter:
        assert isinstance(adapter.send(message, "k-att"), Accepted)
    assert loaded == [ref]
    with InProcessSimulatorAdapter(SimulatorCore()) as adapter, pytest.raises(ProviderConfigError):
        adapter.send(message, "k-att")


def test_stale_signature_is_refused() -> None:
    core = SimulatorCore()
    far_future = time.time() + 3600
    adapter = InProcessSimulatorAdapter(core, clock=lambda: far_future)
    headers, body = render(_event("SM1", "k", "delivered", None), "tidings-simulator-secret", 0)
    with pytest.raises(InvalidSignature, match="tolerance"):
        adapter.verify_webhook(WebhookRequest("POST", "http://t/", headers, body))


def test_signature_header_name_is_case_insensitive_and_batches_are_accepted() -> None:
    adapter = InProcessSimulatorAdapter(SimulatorCore())
    events = [_event("SM1", "k", "sent", None), _event("SM1", "k", "delivered", None)]
    body = json.dumps(events).encode()
    headers = {"x-simulator-signature": sign(DEFAULT_WEBHOOK_SECRET, body, int(time.time()))}
    observations = adapter.verify_webhook(WebhookRequest("POST", "http://t/", headers, body))
    assert [o.raw_status for o in observations] == ["sent", "delivered"]


def test_registry_creates_the_simulator_adapter(simulator_url: str) -> None:
    assert "simulator" in registered()
    adapter = create("simulator", {"base_url": simulator_url, "timeout": 2})
    assert isinstance(adapter, SimulatorAdapter) and adapter.timeout == 2.0
    adapter.close()
    with pytest.raises(ProviderConfigError):
        create("no-such-provider", {})
    with pytest.raises(ProviderConfigError):
        create("simulator", {})


def test_receipts_from_the_process_reach_a_real_receiver(
    simulator_url: str, http_control: HttpControl
) -> None:
    receiver = Receiver()
    try:
        http_control.configure(webhook_url=receiver.url, receipt_delay_ms=0)
        with SimulatorAdapter(simulator_url, DEFAULT_WEBHOOK_SECRET, timeout=2.0) as adapter:
            sent = adapter.send(sms(), "k-receipt")
            arrived = receiver.wait_for(2)
            requests = [WebhookRequest("POST", receiver.url, h, b) for h, b in arrived]
            observations = [o for r in requests for o in adapter.verify_webhook(r)]
        assert {o.raw_status for o in observations} == {"sent", "delivered"}
        assert {o.provider_message_id for o in observations} == {sent.provider_message_id}
    finally:
        receiver.close()


def test_control_endpoints(simulator_url: str, http_control: HttpControl) -> None:
    http = httpx.Client(base_url=simulator_url, timeout=5.0)
    assert http.get("/_config").json()["retry_after_seconds"] == 7
    bad = http.put("/_config", json={"rate_429": 0.7, "rate_5xx": 0.7})
    assert bad.status_code == 422 and bad.json()["code"] == "INVALID_CONFIG"
    assert http.put("/_config", json={"no_such_field": 1}).status_code == 422
    assert http.get("/messages/nope").status_code == 404
    assert http.get("/messages", params={"idempotency_key": "nope"}).status_code == 404
    reply = http.post("/sms/send", json={"to": "+15550001234", "body": "x", "idempotency_key": "k"})
    assert reply.status_code == 201 and reply.json()["status"] == "queued"
    [entry] = http.get("/_ledger").json()
    assert set(entry) == {
        "channel",
        "idempotency_key",
        "destination_hash",
        "received_at",
        "provider_message_id",
        "outcome",
        "profile",  # the provider it was sent through (a soak switches them)
    }
    assert entry["destination_hash"] == hashlib.sha256(b"+15550001234").hexdigest()
    assert http.post("/_reset").status_code == 200
    assert http.get("/_ledger").json() == []
    http.close()
