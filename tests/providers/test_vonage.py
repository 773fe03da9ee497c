"""Vonage SMS API: conformance against a fake replaying its published answers.

The SMS API answers HTTP 200 with ``{"message-count", "messages": [...]}``
whatever happened (see Vonage's "Troubleshooting SMS"); delivery receipts
carry the documented fields and a ``sig`` computed with Vonage's published
algorithm. The signature vectors below are those of Vonage's own SDK tests
(params a=1, b=2, timestamp=1461605396; secret "secret").
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import parse_qs, urlencode

import httpx
import pytest

from tests.providers.conformance import AdapterConformance, Outcome, Signature
from tests.providers.peer_support import FakeHttpProvider, new_id
from tidings.domain.keys import attempt_key
from tidings.domain.redaction import REDACTED
from tidings.providers.correlation import expand
from tidings.providers.errors import InvalidSignature, ProviderConfigError
from tidings.providers.messages import OutboundMessage, WebhookRequest
from tidings.providers.outcomes import (
    Accepted,
    Indeterminate,
    ObservedStatus,
    RejectCode,
    Rejected,
    Retryable,
)
from tidings.providers.settings import build
from tidings.providers.vonage import VonageAdapter, signature

API_KEY, API_SECRET = "abcd1234", "api-secret-0123"
SIGNATURE_SECRET = "signature-secret-0123"


def vonage_sig(params: Mapping[str, str], secret: str, method: str = "md5hash") -> str:
    # Vonage's published algorithm, written out independently of the adapter.
    text = "".join(
        "&" + name + "=" + params[name].replace("&", "_").replace("=", "_")
        for name in sorted(params)
    )
    if method == "md5hash":
        return hashlib.md5((text + secret).encode()).hexdigest()
    return hmac.new(secret.encode(), text.encode(), getattr(hashlib, method)).hexdigest()


class VonageFake(FakeHttpProvider):
    def route(self, request: httpx.Request) -> httpx.Response:
        assert request.method == "POST" and request.url.path == "/sms/json"
        form = {k: v[0] for k, v in parse_qs(request.content.decode()).items()}
        assert (form["api_key"], form["api_secret"]) == (API_KEY, API_SECRET)
        assert len(form.get("client-ref", "")) <= 40  # Vonage's documented limit
        self.record(expand(form.get("client-ref")))
        outcome = self.outcomes.get(form["to"], "accept")
        if outcome == "timeout":
            return self.stall(request)
        status, text = {
            "rate_limit": ("1", "Throughput Rate Exceeded - please wait [ 30 ] and retry"),
            "reject": ("6", "Invalid Message"),
        }.get(outcome, ("0", ""))
        return httpx.Response(200, json=answer(form, [status], text))


def answer(form: Mapping[str, str], statuses: list[str], text: str = "") -> dict[str, Any]:
    messages = []
    for status in statuses:
        if status == "0":
            messages.append(
                {
                    "to": form.get("to", "447700900000"),
                    "message-id": new_id()[:16].upper(),
                    "status": "0",
                    "remaining-balance": "15.53590000",
                    "message-price": "0.03330000",
                    "network": "23410",
                    "client-ref": form.get("client-ref", ""),
                }
            )
        else:
            messages.append({"status": status, "error-text": text})
    return {"message-count": str(len(messages)), "messages": messages}


class VonagePeer:
    retry_after_seconds = None  # status "1" promises no wait time
    reject_code = RejectCode.INVALID_DESTINATION  # status 6: unrecognised prefix

    def __init__(self, fake: VonageFake):
        self.fake = fake

    def message(self, outcome: Outcome, channel: str) -> OutboundMessage:
        to = f"+44770{int(new_id()[:8], 16) % 10**7:07d}"
        self.fake.outcomes[to.lstrip("+")] = outcome
        return OutboundMessage("sms", to, "conformance body")

    def undelivered_code(self, channel: str) -> RejectCode:
        return RejectCode.UNREACHABLE

    def requests_recorded(self, idempotency_key: str) -> int:
        return self.fake.keys[idempotency_key]

    def settle(self) -> None:
        pytest.skip("vonage has no lookup to settle")

    def webhook(
        self,
        provider_message_id: str,
        idempotency_key: str,
        raw_status: str,
        *,
        signature: Signature = "valid",
        destination: str | None = None,
    ) -> WebhookRequest:
        params = receipt(provider_message_id, idempotency_key, raw_status, destination)
        secret = "not-the-secret" if signature == "wrong_secret" else SIGNATURE_SECRET
        params["sig"] = vonage_sig(params, secret)
        if signature == "missing":
            del params["sig"]
        if signature == "tampered":
            params["status"] = "failed"
        return WebhookRequest("GET", "https://tidings.test/hooks/vonage", {}, b"", params)


def receipt(message_id: str, key: str, status: str, to: str | None = None) -> dict[str, str]:
    # A delivery receipt as Vonage's "Delivery receipts" guide shows it, signed.
    return {
        "msisdn": (to or "447700900000").lstrip("+"),
        "to": "Tidings",
        "network-code": "23410",
        "messageId": message_id,
        "price": "0.03330000",
        "status": status,
        "scts": "3001020305",
        "err-code": "0" if status in ("delivered", "accepted", "buffered") else "2",
        "api-key": API_KEY,
        "client-ref": key,
        "message-timestamp": "2030-01-02 03:05:00",
        "timestamp": str(int(time.time())),
        "nonce": "ea3b7e4f-0d8b-4b5f-9c55-39d2e5f2e1a1",
    }


@pytest.fixture
def fake() -> VonageFake:
    return VonageFake()


def make_adapter(fake: VonageFake | None = None, **kw: Any) -> VonageAdapter:
    client = (fake or VonageFake()).client("https://rest.nexmo.com")
    options: dict[str, Any] = {"sender": "Tidings", "signature_secret": SIGNATURE_SECRET}
    return VonageAdapter(API_KEY, API_SECRET, client=client, **(options | kw))


class TestVonageConformance(AdapterConformance):
    @pytest.fixture
    def adapter(self, fake: VonageFake) -> Iterator[VonageAdapter]:
        with make_adapter(fake) as adapter:
            yield adapter

    @pytest.fixture
    def peer(self, fake: VonageFake) -> VonagePeer:
        return VonagePeer(fake)


# --- sending ------------------------------------------------------------------


def sms(body: str = "hello", **kw: Any) -> OutboundMessage:
    return OutboundMessage("sms", "+447700900001", body, **kw)


def test_request_shape(fake: VonageFake) -> None:
    adapter = make_adapter(fake, callback_url="https://tidings.test/hooks/vonage")
    assert isinstance(adapter.send(sms("Café ✓", validity_seconds=5), "k:attempt:1"), Accepted)
    form = {k: v[0] for k, v in parse_qs(fake.requests[-1].content.decode()).items()}
    assert form["to"] == "447700900001"  # digits only
    assert form["type"] == "unicode"  # ✓ is not GSM-7
    assert form["client-ref"] == "k:attempt:1"
    assert form["ttl"] == "20000"  # clamped to Vonage's minimum
    assert form["status-report-req"] == "1"
    adapter.send(sms("plain text"), "k2")
    assert parse_qs(fake.requests[-1].content.decode())["type"] == ["text"]


def test_our_attempt_key_fits_client_ref_and_comes_back_whole(fake: VonageFake) -> None:
    # Vonage: "Client reference of up to 40 characters"; ours is 42 written out.
    key = attempt_key("9b2f7c1e-3d4a-4f5b-8c6d-7e8f9a0b1c2d", 1234)
    assert len(key) > 40
    make_adapter(fake).send(sms(), key)
    client_ref = parse_qs(fake.requests[-1].content.decode())["client-ref"][0]
    assert len(client_ref) <= 40
    params = receipt("0B00000127FDBC63", client_ref, "delivered")
    params["sig"] = vonage_sig(params, SIGNATURE_SECRET)
    [observation] = make_adapter().verify_webhook(WebhookRequest("GET", "u", {}, b"", params))
    assert observation.attempt_key == key  # the receipt names the attempt


def test_a_key_too_long_for_client_ref_travels_as_a_digest(fake: VonageFake) -> None:
    key = "intent-" + "x" * 120 + ":attempt:1"
    make_adapter(fake).send(sms(), key)
    client_ref = parse_qs(fake.requests[-1].content.decode())["client-ref"][0]
    assert len(client_ref) <= 40 and client_ref.startswith("sha256-")
    params = receipt("0B00000127FDBC63", client_ref, "delivered")
    params["sig"] = vonage_sig(params, SIGNATURE_SECRET)
    [observation] = make_adapter().verify_webhook(WebhookRequest("GET", "u", {}, b"", params))
    assert observation.attempt_key is None  # matched by messageId instead
    assert observation.provider_message_id == "0B00000127FDBC63"


def test_the_api_secret_never_sits_in_a_request_object(fake: VonageFake) -> None:
    request = make_adapter(fake).build_request(sms(), "k")
    assert API_SECRET not in repr(request)


def respond(statuses: list[str], text: str = "refused") -> VonageAdapter:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=answer({}, statuses, text))

    client = httpx.Client(transport=httpx.MockTransport(handler), base_url="https://x")
    return VonageAdapter(API_KEY, API_SECRET, sender="Tidings", client=client)


@pytest.mark.parametrize(
    ("statuses", "kind", "code"),
    [
        (["0"], Accepted, None),
        (["0", "0"], Accepted, None),
        (["1"], Retryable, RejectCode.RATE_LIMITED),
        (["10"], Retryable, RejectCode.RATE_LIMITED),
        (["9"], Retryable, RejectCode.PROVIDER_ERROR),
        (["5"], Indeterminate, RejectCode.PROVIDER_ERROR),
        (["0", "1"], Indeterminate, RejectCode.PROVIDER_ERROR),  # part 1 went out
        (["3"], Rejected, RejectCode.REQUEST_INVALID),
        (["4"], Rejected, RejectCode.AUTH_FAILED),
        (["7"], Rejected, RejectCode.OPTED_OUT),
        # vonage_sms.yml x-errors 15: "a non-authorized sender ID in the from field".
        (["15"], Rejected, RejectCode.SENDER_REJECTED),
        # x-errors 2, 22 and 23 are about parameters of the request (a missing
        # one, the network code, the callback URL), never about the recipient.
        (["2"], Rejected, RejectCode.REQUEST_INVALID),
        (["22"], Rejected, RejectCode.REQUEST_INVALID),
        (["23"], Rejected, RejectCode.REQUEST_INVALID),
        (["29"], Rejected, RejectCode.ACCOUNT_RESTRICTED),
        (["98"], Rejected, RejectCode.UNKNOWN),
    ],
)
def test_send_status_table(statuses: list[str], kind: type, code: RejectCode | None) -> None:
    result = respond(statuses).send(sms(), "k")
    assert isinstance(result, kind)
    assert getattr(result, "code", None) is code


def test_non_200_answers_follow_http_rules() -> None:
    client = httpx.Client(
        transport=httpx.MockTransport(lambda r: httpx.Response(503)), base_url="https://x"
    )
    adapter = VonageAdapter(API_KEY, API_SECRET, sender="T", client=client)
    assert isinstance(adapter.send(sms(), "k"), Indeterminate)


# --- receipts -------------------------------------------------------------------

RECEIPT_TABLE = [
    ("accepted", "0", ObservedStatus.accepted, None),
    ("buffered", "0", ObservedStatus.accepted, None),
    ("delivered", "0", ObservedStatus.delivered, None),
    ("expired", "1", ObservedStatus.undelivered, RejectCode.UNKNOWN),
    ("failed", "2", ObservedStatus.undelivered, RejectCode.UNREACHABLE),  # "retry"
    ("failed", "3", ObservedStatus.failed, RejectCode.INVALID_DESTINATION),
    ("failed", "4", ObservedStatus.failed, RejectCode.OPTED_OUT),
    ("failed", "6", ObservedStatus.failed, RejectCode.CARRIER_FILTERED),
    ("failed", "7", ObservedStatus.undelivered, RejectCode.UNREACHABLE),
    ("rejected", "9", ObservedStatus.failed, RejectCode.OPTED_OUT),
    ("failed", "77", ObservedStatus.failed, RejectCode.UNKNOWN),
    ("unknown", "99", ObservedStatus.unknown, RejectCode.UNKNOWN),
]


@pytest.mark.parametrize(("raw", "err", "status", "code"), RECEIPT_TABLE)
def test_receipt_mapping_table(
    raw: str, err: str, status: ObservedStatus, code: RejectCode | None
) -> None:
    params = receipt("0B00000127FDBC63", "k", raw) | {"err-code": err}
    params["sig"] = vonage_sig(params, SIGNATURE_SECRET)
    [observation] = make_adapter().verify_webhook(
        WebhookRequest("GET", "https://t/", {}, b"", params)
    )
    assert (observation.status, observation.code) == (status, code and code.value)
    assert observation.raw["msisdn"] == REDACTED


def test_receipts_arrive_as_get_form_post_or_json() -> None:
    params = receipt("0B00000127FDBC63", "k:attempt:1", "delivered")
    params["sig"] = vonage_sig(params, SIGNATURE_SECRET)
    adapter = make_adapter()
    form = WebhookRequest(
        "POST",
        "https://t/",
        {"Content-Type": "application/x-www-form-urlencoded"},
        urlencode(params).encode(),
    )
    as_json = WebhookRequest(
        "POST", "https://t/", {"Content-Type": "application/json"}, json.dumps(params).encode()
    )
    for request in (form, as_json, WebhookRequest("GET", "https://t/", {}, b"", params)):
        [observation] = adapter.verify_webhook(request)
        assert observation.attempt_key == "k:attempt:1"
        assert observation.occurred_at is not None


# --- signatures: Vonage's published vectors -----------------------------------------

VECTOR = {"a": "1", "b": "2", "timestamp": "1461605396"}
VECTORS = [
    ("md5hash", "6af838ef94998832dbfc29020b564830"),
    ("md5", "c15c21ced558c93a226c305f58f902f2"),
    ("sha1", "3e19a4e6880fdc2c1426bfd0587c98b9532f0210"),
    ("sha256", "a321e824b9b816be7c3f28859a31749a098713d39f613c80d455bbaffae1cd24"),
    (
        "sha512",
        "812a18f76680fa0fe1b8bd9ee1625466ceb1bd96242e4d050d2cfd9a7b40166c"
        "63ed26ec9702168781b6edcf1633db8ff95af9341701004eec3fcf9550572ee8",
    ),
]


@pytest.mark.parametrize(("method", "expected"), VECTORS)
def test_published_signature_vectors(method: str, expected: str) -> None:
    assert signature(VECTOR, "secret", method) == expected
    assert vonage_sig(VECTOR, "secret", method) == expected  # the peer agrees too


@pytest.mark.parametrize(("method", "expected"), VECTORS)
def test_vectors_verify_through_the_adapter(method: str, expected: str) -> None:
    adapter = VonageAdapter(
        API_KEY,
        API_SECRET,
        signature_secret="secret",
        signature_method=method,
        clock=lambda: 1461605396 + 10,
    )
    request = WebhookRequest("GET", "https://t/", {}, b"", VECTOR | {"sig": expected.upper()})
    assert adapter.verify_webhook(request) == []  # valid, but not a receipt
    with pytest.raises(InvalidSignature):
        adapter.verify_webhook(
            WebhookRequest("GET", "https://t/", {}, b"", VECTOR | {"b": "3", "sig": expected})
        )


def test_values_with_ampersand_and_equals_are_escaped_before_signing() -> None:
    params = {"text": "a&b=c", "timestamp": "1461605396"}
    assert signature(params, "secret") == signature({**params, "text": "a_b_c"}, "secret")


def test_stale_missing_and_unconfigured_signatures() -> None:
    stale = VonageAdapter(API_KEY, API_SECRET, signature_secret="secret")
    request = WebhookRequest("GET", "https://t/", {}, b"", VECTOR | {"sig": VECTORS[0][1]})
    with pytest.raises(InvalidSignature, match="tolerance"):
        stale.verify_webhook(request)
    with pytest.raises(InvalidSignature, match="not signed"):
        stale.verify_webhook(WebhookRequest("GET", "https://t/", {}, b"", VECTOR))
    with pytest.raises(ProviderConfigError):
        VonageAdapter(API_KEY, API_SECRET).verify_webhook(request)
    with pytest.raises(ProviderConfigError):
        VonageAdapter(API_KEY, API_SECRET, signature_method="crc32")


def test_built_from_settings_and_secrets_stay_out_of_repr() -> None:
    adapter = build(
        "vonage",
        {
            "api_key": API_KEY,
            "api_secret": API_SECRET,
            "signature_secret": SIGNATURE_SECRET,
            "signature_method": "sha256",
            "from": "Tidings",
        },
    )
    assert isinstance(adapter, VonageAdapter)
    assert API_SECRET not in repr(adapter) and SIGNATURE_SECRET not in repr(adapter)
