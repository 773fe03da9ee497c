"""Twilio: conformance against a fake that checks every request against Twilio's OpenAPI.

Peers: (1) an httpx fake that replays Twilio's published response shapes
(the examples in twilio_api_v2010.json and Twilio's error format) and
rejects any send request the OpenAPI description would not accept; (2)
Stoplight Prism serving that same description, when installed (it validates
requests itself); (3) Twilio's published signature test vectors.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from tests.providers.conformance import AdapterConformance, Outcome, Signature
from tests.providers.peer_support import new_id
from tests.providers.twilio_peer import (
    ACCOUNT,
    CALLBACK,
    SERVICE,
    TOKEN,
    TwilioFake,
    make_adapter,
    spec_errors,
    twilio_error,
    twilio_signature,
)
from tidings.providers.errors import InvalidSignature, ProviderConfigError
from tidings.providers.messages import OutboundMessage, WebhookRequest
from tidings.providers.outcomes import Accepted, ObservedStatus, RejectCode, Rejected, Retryable
from tidings.providers.settings import adapter_from_env
from tidings.providers.twilio import TwilioAdapter, signature, url_variants


def test_the_spec_check_itself_catches_bad_requests(spec: dict[str, Any]) -> None:
    def request(form: dict[str, str], account: str = ACCOUNT) -> httpx.Request:
        url = f"https://api.twilio.com/2010-04-01/Accounts/{account}/Messages.json"
        headers = {"Authorization": "Basic eA=="}
        return httpx.Request("POST", url, data=form, headers=headers)

    assert spec_errors(spec, request({"To": "+15550001111", "From": "+15550002222"})) == []
    assert "missing To" in spec_errors(spec, request({"From": "+1555"}))
    assert "unknown Tо" in spec_errors(spec, request({"To": "+1", "Tо": "x", "From": "+1"}))
    assert any(
        "ValidityPeriod" in e
        for e in spec_errors(spec, request({"To": "+1", "From": "+1", "ValidityPeriod": "soon"}))
    )
    assert any("AccountSid" in e for e in spec_errors(spec, request({"To": "+1"}, "nope")))
    assert "neither From nor MessagingServiceSid" in spec_errors(spec, request({"To": "+1"}))


class TwilioPeer:
    retry_after_seconds = None  # Twilio promises no Retry-After on 20429
    reject_code = RejectCode.INVALID_DESTINATION

    def __init__(self, fake: TwilioFake):
        self.fake = fake

    def message(self, outcome: Outcome, channel: str) -> OutboundMessage:
        to = f"+1555{int(new_id()[:8], 16) % 10**7:07d}"
        self.fake.outcomes[to] = outcome
        return OutboundMessage("sms", to, "conformance body")

    def undelivered_code(self, channel: str) -> RejectCode:
        return RejectCode.UNREACHABLE

    def requests_recorded(self, idempotency_key: str) -> int:
        return self.fake.keys[idempotency_key]

    def settle(self) -> None:
        self.fake.settle()

    def webhook(
        self,
        provider_message_id: str,
        idempotency_key: str,
        raw_status: str,
        *,
        signature: Signature = "valid",
        destination: str | None = None,
    ) -> WebhookRequest:
        params = status_callback(provider_message_id, raw_status, destination)
        url = f"{CALLBACK}?{urlencode({'tidings_attempt': idempotency_key})}"
        token = "not-the-token" if signature == "wrong_secret" else TOKEN
        headers = {"X-Twilio-Signature": twilio_signature(token, url, params)}
        if signature == "missing":
            headers = {}
        if signature == "tampered":
            params["MessageStatus"] = "failed"
        body = urlencode(params).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        return WebhookRequest("POST", url, headers, body)


def status_callback(sid: str, status: str, to: str | None = None) -> dict[str, str]:
    # The parameters of an SMS status callback, as Twilio posts them.
    params = {
        "AccountSid": ACCOUNT,
        "ApiVersion": "2010-04-01",
        "From": "+15550009999",
        "MessageSid": sid,
        "MessageStatus": status,
        "SmsSid": sid,
        "SmsStatus": status,
    }
    if to is not None:
        params["To"] = to
    if status in ("undelivered", "failed"):
        params["ErrorCode"] = "30003"
    return params


@pytest.fixture
def fake(spec: dict[str, Any]) -> TwilioFake:
    return TwilioFake(spec)


class TestTwilioConformance(AdapterConformance):
    @pytest.fixture
    def adapter(self, fake: TwilioFake) -> Iterator[TwilioAdapter]:
        with make_adapter(fake) as adapter:
            yield adapter

    @pytest.fixture
    def peer(self, fake: TwilioFake) -> TwilioPeer:
        return TwilioPeer(fake)


# --- sending ------------------------------------------------------------------


def sms(to: str = "+15550001234", **kwargs: Any) -> OutboundMessage:
    return OutboundMessage("sms", to, "hello", **kwargs)


def test_send_request_shape_and_key_in_the_callback_url(fake: TwilioFake) -> None:
    adapter = make_adapter(fake, messaging_service_sid=SERVICE)
    result = adapter.send(sms(validity_seconds=99_999), "intent-1:attempt:1")
    assert isinstance(result, Accepted) and result.raw_status == "accepted"
    form = {k: v[0] for k, v in parse_qs(fake.requests[-1].content.decode()).items()}
    assert form["MessagingServiceSid"] == SERVICE and "From" not in form
    assert form["ValidityPeriod"] == "36000"  # clamped to Twilio's maximum
    query = parse_qs(urlsplit(form["StatusCallback"]).query)
    assert query["tidings_attempt"] == ["intent-1:attempt:1"]
    assert (
        fake.requests[-1].headers["authorization"]
        == "Basic " + base64.b64encode(f"{ACCOUNT}:{TOKEN}".encode()).decode()
    )


def test_an_explicit_sender_wins_and_a_missing_one_is_a_config_error(fake: TwilioFake) -> None:
    adapter = make_adapter(fake, messaging_service_sid=SERVICE)
    adapter.send(sms(sender="+15550007777"), "k")
    form = parse_qs(fake.requests[-1].content.decode())
    assert form["From"] == ["+15550007777"] and "MessagingServiceSid" not in form
    bare = TwilioAdapter(ACCOUNT, TOKEN, client=fake.client("https://api.twilio.com"))
    with pytest.raises(ProviderConfigError):
        bare.send(sms(), "k")


def test_20429_is_retryable_whatever_http_status_carries_it() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return twilio_error(400, 20429, "Too Many Requests")

    client = httpx.Client(transport=httpx.MockTransport(answer), base_url="https://x.test")
    adapter = TwilioAdapter(ACCOUNT, TOKEN, from_number="+1555", client=client)
    result = adapter.send(sms(), "k")
    assert isinstance(result, Retryable) and result.code is RejectCode.RATE_LIMITED


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (21211, RejectCode.INVALID_DESTINATION),
        (21610, RejectCode.OPTED_OUT),
        (21614, RejectCode.NOT_SMS_CAPABLE),
        (20003, RejectCode.AUTH_FAILED),
        (12345, RejectCode.UNKNOWN),
    ],
)
def test_send_error_codes(code: int, expected: RejectCode) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return twilio_error(400, code, "refused")

    client = httpx.Client(transport=httpx.MockTransport(answer), base_url="https://x.test")
    result = TwilioAdapter(ACCOUNT, TOKEN, from_number="+1555", client=client).send(sms(), "k")
    assert isinstance(result, Rejected) and result.code is expected


# --- status mapping -------------------------------------------------------------

STATUS_TABLE = [
    ("queued", None, ObservedStatus.accepted, None),
    ("sending", None, ObservedStatus.accepted, None),
    ("sent", None, ObservedStatus.accepted, None),
    ("accepted", None, ObservedStatus.accepted, None),
    ("scheduled", None, ObservedStatus.accepted, None),
    ("delivered", None, ObservedStatus.delivered, None),
    ("read", None, ObservedStatus.delivered, None),
    ("partially_delivered", None, ObservedStatus.delivered, None),
    ("undelivered", "30003", ObservedStatus.undelivered, RejectCode.UNREACHABLE),
    ("undelivered", "30005", ObservedStatus.undelivered, RejectCode.INVALID_DESTINATION),
    ("undelivered", "30006", ObservedStatus.undelivered, RejectCode.NOT_SMS_CAPABLE),
    ("undelivered", "30007", ObservedStatus.undelivered, RejectCode.CARRIER_FILTERED),
    ("failed", "30008", ObservedStatus.failed, RejectCode.UNKNOWN),
    ("failed", "21610", ObservedStatus.failed, RejectCode.OPTED_OUT),
    ("failed", "21614", ObservedStatus.failed, RejectCode.NOT_SMS_CAPABLE),
    ("failed", "21211", ObservedStatus.failed, RejectCode.INVALID_DESTINATION),
    ("canceled", None, ObservedStatus.failed, None),
    ("receiving", None, ObservedStatus.unknown, None),
]


@pytest.mark.parametrize(("raw", "code", "status", "normalized"), STATUS_TABLE)
def test_status_mapping_table(
    raw: str, code: str | None, status: ObservedStatus, normalized: RejectCode | None
) -> None:
    adapter = TwilioAdapter(ACCOUNT, TOKEN)
    expected = (status, None if normalized is None else normalized.value)
    assert adapter.map_status(raw, code) == expected


def test_lookup_reads_error_code_and_date(fake: TwilioFake) -> None:
    adapter = make_adapter(fake)
    to = "+15550002001"
    fake.outcomes[to] = "undeliverable"
    sent = adapter.send(sms(to), "k")
    fake.settle()
    observation = adapter.status(sent.provider_message_id)
    assert observation.raw_code == "30003" and observation.code == "UNREACHABLE"
    assert observation.occurred_at is not None and observation.occurred_at.utcoffset() is not None
    assert observation.attempt_key is None  # Twilio cannot give our key back on a poll


# --- webhook signatures: Twilio's published test vectors ------------------------

VECTOR_URL = "https://mycompany.com/myapp.php?foo=1&bar=2"
VECTOR_PARAMS = {
    "CallSid": "CA1234567890ABCDE",
    "Caller": "+14158675309",
    "Digits": "1234",
    "From": "+14158675309",
    "To": "+18005551212",
}


def test_published_signature_vectors() -> None:
    # twilio-python tests/unit/test_request_validator.py
    assert signature(b"12345", VECTOR_URL, VECTOR_PARAMS) == "RSOYDt4T1cUTdK1PDd93/VVr8B8="
    duplicates = {"Sid": "CA123", "SidAccount": "AC123", "Digits": ["5678", "1234"]}
    assert signature(b"12345", VECTOR_URL, duplicates) == "IK+Dwps556ElfBT0I3Rgjkr1wJU="


@pytest.mark.parametrize(
    ("url", "given"),
    [
        (VECTOR_URL, "RSOYDt4T1cUTdK1PDd93/VVr8B8="),
        (VECTOR_URL.replace(".com", ".com:1234"), "RSOYDt4T1cUTdK1PDd93/VVr8B8="),
        (VECTOR_URL, "kvajT1Ptam85bY51eRf/AJRuM3w="),  # signed over the URL with :443
        (
            VECTOR_URL.replace(".com", ".com:1234").replace("https", "http"),
            "Zmvh+3yNM1Phv2jhDCwEM3q5ebU=",
        ),
        (VECTOR_URL.replace("https", "http"), "0ZXoZLH/DfblKGATFgpif+LLRf4="),
    ],
)
def test_published_vectors_verify_through_the_adapter(url: str, given: str) -> None:
    adapter = TwilioAdapter(ACCOUNT, "12345")
    headers = {"X-Twilio-Signature": given}
    request = WebhookRequest("POST", url, headers, urlencode(VECTOR_PARAMS).encode())
    assert adapter.verify_webhook(request) == []  # a valid voice callback: no status event


def test_port_variants() -> None:
    assert url_variants("https://h.test/x?a=1") == [
        "https://h.test/x?a=1",
        "https://h.test:443/x?a=1",
    ]


@pytest.mark.parametrize("header", [None, "", "RSOYDt4T1cUTdK1PDd93/VVr8B8=x", "AAAA"])
def test_missing_or_wrong_signatures_are_refused(header: str | None) -> None:
    adapter = TwilioAdapter(ACCOUNT, "12345")
    headers = {} if header is None else {"X-Twilio-Signature": header}
    request = WebhookRequest("POST", VECTOR_URL, headers, urlencode(VECTOR_PARAMS).encode())
    with pytest.raises(InvalidSignature):
        adapter.verify_webhook(request)


def test_callback_carries_the_attempt_key_and_error_code() -> None:
    adapter = TwilioAdapter(ACCOUNT, TOKEN)
    peer = TwilioPeer(TwilioFake({}))
    [observation] = adapter.verify_webhook(peer.webhook("SM1", "intent:attempt:2", "undelivered"))
    assert observation.attempt_key == "intent:attempt:2"
    assert (observation.status, observation.code) == (ObservedStatus.undelivered, "UNREACHABLE")


def test_an_inbound_message_names_the_number_it_was_sent_to() -> None:
    """`To` is our number the recipient texted: whose texts a STOP ends."""
    adapter = TwilioAdapter(ACCOUNT, "12345")
    headers = {"X-Twilio-Signature": "RSOYDt4T1cUTdK1PDd93/VVr8B8="}
    request = WebhookRequest("POST", VECTOR_URL, headers, urlencode(VECTOR_PARAMS).encode())
    message = adapter.parse_inbound(request)
    assert (message.sender, message.to) == ("+14158675309", "+18005551212")


# --- settings ---------------------------------------------------------------------


def test_built_from_env_and_secrets_stay_out_of_repr() -> None:
    environ = {
        "TIDINGS_TWILIO_ACCOUNT_SID": ACCOUNT,
        "TIDINGS_TWILIO_AUTH_TOKEN": TOKEN,
        "TIDINGS_TWILIO_MESSAGING_SERVICE_SID": SERVICE,
        "TIDINGS_TWILIO_TIMEOUT": "3",
        "TIDINGS_SES_REGION": "eu-west-1",
    }
    adapter = adapter_from_env("twilio", environ)
    assert isinstance(adapter, TwilioAdapter) and adapter.timeout == 3.0
    assert TOKEN not in repr(adapter)
    with pytest.raises(ProviderConfigError, match="auth_token"):
        adapter_from_env("twilio", {"TIDINGS_TWILIO_ACCOUNT_SID": ACCOUNT})


def test_prism_accepts_our_send_and_lookup(prism_url: str) -> None:
    with TwilioAdapter(
        ACCOUNT, TOKEN, messaging_service_sid=SERVICE, status_callback=CALLBACK, base_url=prism_url
    ) as adapter:
        result = adapter.send(sms(validity_seconds=600), "intent:attempt:1")
        assert isinstance(result, Accepted), result
        assert result.provider_message_id.startswith("SM")
        observation = adapter.status(result.provider_message_id)
        assert observation is not None and observation.raw_status == "sent"


def test_prism_is_really_validating(prism_url: str) -> None:
    # Without To, Prism must answer 422 from the description: the check is live.
    response = httpx.post(
        f"{prism_url}/2010-04-01/Accounts/{ACCOUNT}/Messages.json",
        data={"From": "+15550009999", "Body": "x"},
        auth=(ACCOUNT, TOKEN),
    )
    assert response.status_code == 422
