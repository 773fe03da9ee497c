"""Postmark: conformance against a fake replaying Postmark's published answers.

The peer answers as Postmark's API reference shows: ``POST /email`` 200
``{To, SubmittedAt, MessageID, ErrorCode: 0, Message: "OK"}``, 422
``{ErrorCode, Message}``, 429; ``GET /messages/outbound/{id}/details`` with
``Status`` and ``MessageEvents``. Webhooks are the documented Delivery /
Bounce / SpamComplaint payloads, authenticated by Basic credentials.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.providers.conformance import AdapterConformance, Outcome, Signature
from tests.providers.peer_support import FakeHttpProvider, new_id
from tidings.providers.correlation import chunk, unchunk
from tidings.providers.errors import InvalidSignature, ProviderConfigError
from tidings.providers.messages import AttachmentRef, OutboundMessage, WebhookRequest
from tidings.providers.outcomes import Accepted, ObservedStatus, RejectCode, Rejected, Retryable
from tidings.providers.postmark import PostmarkAdapter
from tidings.providers.settings import build

TOKEN = "server-token-0123456789"
SEARCH_FILTERS = {
    "recipient",
    "fromemail",
    "tag",
    "status",
    "todate",
    "fromdate",
    "subject",
    "messagestream",
}
HOOK_USER, HOOK_PASSWORD = "tidings", "hook-password-42"


class PostmarkFake(FakeHttpProvider):
    def __init__(self) -> None:
        super().__init__()
        self.messages: dict[str, dict[str, Any]] = {}

    def route(self, request: httpx.Request) -> httpx.Response:
        assert request.headers["x-postmark-server-token"] == TOKEN
        if request.method == "POST" and request.url.path == "/email":
            return self._send(request)
        parts = request.url.path.strip("/").split("/")
        if request.method == "GET" and parts[:2] == ["messages", "outbound"] and len(parts) == 4:
            return self._details(parts[2])
        if request.method == "GET" and parts == ["messages", "outbound"]:
            return self._search(dict(request.url.params))
        return httpx.Response(404)

    def _search(self, params: dict[str, str]) -> httpx.Response:
        """The outbound messages search: `count` and `offset` required, at
        most one `metadata_<name>` filter (messages-api reference)."""
        assert set(params) - {"count", "offset"} <= SEARCH_FILTERS | {
            p for p in params if p.startswith("metadata_")
        }, params
        assert 0 < int(params["count"]) <= 500 and int(params["offset"]) >= 0
        wanted = {k.removeprefix("metadata_"): v for k, v in params.items() if "metadata_" in k}
        assert len(wanted) <= 1, "Postmark filters on one metadata field"
        found = [
            {
                "MessageID": message_id,
                "To": [{"Email": m["payload"]["To"], "Name": None}],
                "Recipients": [m["payload"]["To"]],
                "ReceivedAt": "2030-01-02T03:04:05.1234567-05:00",
                "Status": "Sent",
                "Subject": m["payload"]["Subject"],
                "MessageStream": m["payload"]["MessageStream"],
                "Metadata": m["payload"]["Metadata"],
            }
            for message_id, m in self.messages.items()
            if all(m["payload"]["Metadata"].get(k) == v for k, v in wanted.items())
        ]
        return httpx.Response(200, json={"TotalCount": len(found), "Messages": found})

    def _send(self, request: httpx.Request) -> httpx.Response:
        payload = json.loads(request.content)
        self.record(unchunk(payload.get("Metadata", {}), "tidings_key"))
        outcome = self.outcomes.get(payload["To"], "accept")
        if outcome == "rate_limit":
            return httpx.Response(429, json={"ErrorCode": 429, "Message": "Rate limit exceeded"})
        if outcome == "reject":
            return httpx.Response(422, json={"ErrorCode": 406, "Message": "Inactive recipient"})
        message_id = new_id()
        self.messages[message_id] = {"payload": payload, "outcome": outcome, "events": []}
        body = {
            "To": payload["To"],
            "SubmittedAt": "2030-01-02T03:04:05.1234567-05:00",
            "MessageID": message_id,
            "ErrorCode": 0,
            "Message": "OK",
        }
        return self.stall(request) if outcome == "timeout" else httpx.Response(200, json=body)

    def _details(self, message_id: str) -> httpx.Response:
        message = self.messages.get(message_id)
        if message is None:
            return httpx.Response(422, json={"ErrorCode": 701, "Message": "Message not found"})
        payload = message["payload"]
        return httpx.Response(
            200,
            json={
                "MessageID": message_id,
                "Recipients": [payload["To"]],
                "Status": "Sent",
                "Subject": payload["Subject"],
                "MessageStream": payload["MessageStream"],
                "Metadata": payload["Metadata"],
                "ReceivedAt": "2030-01-02T03:04:05.1234567-05:00",
                "MessageEvents": message["events"],
            },
        )

    def settle(self) -> None:
        for message in self.messages.values():
            kind = "Transient" if message["outcome"] == "undeliverable" else "Delivered"
            message["events"].append(
                {
                    "Recipient": message["payload"]["To"],
                    "Type": kind,
                    "ReceivedAt": "2030-01-02T03:05:00.0000000-05:00",
                    "Details": {"DeliveryMessage": "smtp;250 2.0.0 OK", "DestinationServer": "x"},
                }
            )


class PostmarkPeer:
    retry_after_seconds = None  # Postmark sends no Retry-After
    reject_code = RejectCode.BOUNCED  # 406 inactive recipient

    def __init__(self, fake: PostmarkFake):
        self.fake = fake

    def message(self, outcome: Outcome, channel: str) -> OutboundMessage:
        to = f"member+{new_id()[:8]}@example.test"
        self.fake.outcomes[to] = outcome
        return OutboundMessage("email", to, "conformance body", subject="Hello")

    def undelivered_code(self, channel: str) -> RejectCode:
        return RejectCode.BOUNCED

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
        if signature == "tampered":
            pytest.skip("Basic credentials do not cover the body: TLS keeps it intact")
        record = {"delivered": "Delivery", "sent": "Open"}.get(raw_status, raw_status)
        event = postmark_event(record, provider_message_id, idempotency_key, destination)
        password = "wrong" if signature == "wrong_secret" else HOOK_PASSWORD
        headers = {} if signature == "missing" else {"Authorization": basic(HOOK_USER, password)}
        return WebhookRequest(
            "POST", "https://tidings.test/hooks/postmark", headers, json.dumps(event).encode()
        )


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def postmark_event(record: str, message_id: str, key: str, to: str | None = None, **extra: Any):
    # Shapes from Postmark's webhook documentation.
    event: dict[str, Any] = {
        "RecordType": record,
        "ServerID": 23,
        "MessageStream": "outbound",
        "MessageID": message_id,
        "Metadata": chunk(key, "tidings_key", 80, 4),
        "Tag": "",
    }
    if record == "Delivery":
        event |= {"Recipient": to or "john@example.com", "DeliveredAt": "2030-01-02T03:05:00Z"}
    elif record in ("Bounce", "SpamComplaint"):
        event |= {
            "ID": 4323372036854775807,
            "Type": "HardBounce" if record == "Bounce" else "SpamComplaint",
            "Email": to or "john@example.com",
            "BouncedAt": "2019-11-05T16:33:54.9070259Z",
        }
    else:
        event |= {"Recipient": to or "john@example.com", "ReceivedAt": "2030-01-02T03:05:00Z"}
    return event | extra


@pytest.fixture
def fake() -> PostmarkFake:
    return PostmarkFake()


def make_adapter(fake: PostmarkFake, **kw: Any) -> PostmarkAdapter:
    return PostmarkAdapter(
        TOKEN,
        sender="notify@tidings.test",
        webhook_credentials=(HOOK_USER, HOOK_PASSWORD),
        client=fake.client("https://api.postmarkapp.com"),
        **kw,
    )


class TestPostmarkConformance(AdapterConformance):
    @pytest.fixture
    def adapter(self, fake: PostmarkFake) -> Iterator[PostmarkAdapter]:
        with make_adapter(fake) as adapter:
            yield adapter

    @pytest.fixture
    def peer(self, fake: PostmarkFake) -> PostmarkPeer:
        return PostmarkPeer(fake)


# --- sending ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("purpose", "stream"),
    [("", "outbound"), ("transactional", "outbound"), ("broadcast", "news"), ("marketing", "news")],
)
def test_purpose_chooses_the_message_stream(fake: PostmarkFake, purpose: str, stream: str) -> None:
    adapter = make_adapter(fake, broadcast_stream="news")
    message = OutboundMessage("email", "a@example.test", "x", metadata={"purpose": purpose})
    assert isinstance(adapter.send(message, "k"), Accepted)
    assert json.loads(fake.requests[-1].content)["MessageStream"] == stream


def test_long_keys_travel_whole_in_metadata_chunks(fake: PostmarkFake) -> None:
    key = "intent-" + "x" * 250 + ":attempt:3"
    adapter = make_adapter(fake)
    adapter.send(OutboundMessage("email", "a@example.test", "x"), key)
    metadata = json.loads(fake.requests[-1].content)["Metadata"]
    assert all(len(v) <= 80 for v in metadata.values()) and len(metadata) <= 4
    assert unchunk(metadata, "tidings_key") == key
    too_long = chunk("y" * 400, "tidings_key", 80, 4)
    assert unchunk(too_long, "tidings_key") is None  # a digest: events match by id instead


def test_attachments_are_loaded_at_send_time(fake: PostmarkFake) -> None:
    ref = AttachmentRef("r", 1, "r.csv", "text/csv", "/reports/r.csv")
    adapter = make_adapter(fake, attachment_loader=lambda r: b"a,b\n1,2\n")
    adapter.send(OutboundMessage("email", "a@example.test", "x", attachments=(ref,)), "k")
    [attachment] = json.loads(fake.requests[-1].content)["Attachments"]
    assert (
        attachment["Name"] == "r.csv" and base64.b64decode(attachment["Content"]) == b"a,b\n1,2\n"
    )


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (
            422,
            # a fact about the request, never about the recipient
            {"ErrorCode": 300, "Message": "Invalid email request"},
            RejectCode.REQUEST_INVALID,
        ),
        (422, {"ErrorCode": 406, "Message": "Inactive recipient"}, RejectCode.BOUNCED),
        (422, {"ErrorCode": 411, "Message": "Forbidden attachment"}, RejectCode.CONTENT_REJECTED),
        (401, {"ErrorCode": 10, "Message": "Bad or missing API token"}, RejectCode.AUTH_FAILED),
        (422, {"ErrorCode": 9999, "Message": "?"}, RejectCode.UNKNOWN),
    ],
)
def test_error_codes(status: int, body: dict[str, Any], expected: RejectCode) -> None:
    client = httpx.Client(
        transport=httpx.MockTransport(lambda r: httpx.Response(status, json=body)),
        base_url="https://x",
    )
    result = PostmarkAdapter(TOKEN, sender="a@b.test", client=client).send(
        OutboundMessage("email", "c@d.test", "x"), "k"
    )
    assert isinstance(result, Rejected) and result.code is expected


def test_429_is_retryable() -> None:
    client = httpx.Client(
        transport=httpx.MockTransport(lambda r: httpx.Response(429, json={"ErrorCode": 429})),
        base_url="https://x",
    )
    result = PostmarkAdapter(TOKEN, sender="a@b.test", client=client).send(
        OutboundMessage("email", "c@d.test", "x"), "k"
    )
    assert isinstance(result, Retryable) and result.code is RejectCode.RATE_LIMITED


# --- status mapping -------------------------------------------------------------

WEBHOOK_TABLE = [
    ("Delivery", {}, ObservedStatus.delivered, None),
    ("Bounce", {"Type": "HardBounce"}, ObservedStatus.failed, RejectCode.BOUNCED),
    ("Bounce", {"Type": "SoftBounce"}, ObservedStatus.undelivered, RejectCode.BOUNCED),
    ("Bounce", {"Type": "Transient"}, ObservedStatus.undelivered, RejectCode.BOUNCED),
    ("Bounce", {"Type": "BadEmailAddress"}, ObservedStatus.failed, RejectCode.INVALID_DESTINATION),
    ("Bounce", {"Type": "Unsubscribe"}, ObservedStatus.failed, RejectCode.OPTED_OUT),
    ("Bounce", {"Type": "AutoResponder"}, ObservedStatus.delivered, None),
    ("SpamComplaint", {}, ObservedStatus.delivered, RejectCode.COMPLAINT),
    ("Open", {}, ObservedStatus.delivered, None),
    ("Click", {}, ObservedStatus.delivered, None),
    # Postmark: "If a recipient unsubscribes, they will be suppressed with the
    # SuppressionReason of ManualSuppression"; the other reasons say what they are.
    (
        "SubscriptionChange",
        {"SuppressSending": True, "SuppressionReason": "ManualSuppression"},
        ObservedStatus.unknown,
        RejectCode.OPTED_OUT,
    ),
    (
        "SubscriptionChange",
        {"SuppressSending": True, "SuppressionReason": "HardBounce"},
        ObservedStatus.unknown,
        RejectCode.BOUNCED,
    ),
    (
        "SubscriptionChange",
        {"SuppressSending": True, "SuppressionReason": "SpamComplaint"},
        ObservedStatus.unknown,
        RejectCode.COMPLAINT,
    ),
    ("SubscriptionChange", {"SuppressSending": False}, ObservedStatus.unknown, None),
    # An ISP's block is about the sender or the content, not the address:
    # Postmark deactivates only after HardBounce and SpamComplaint.
    ("Bounce", {"Type": "Blocked"}, ObservedStatus.failed, RejectCode.SENDER_REJECTED),
]


@pytest.mark.parametrize(("record", "extra", "status", "code"), WEBHOOK_TABLE)
def test_webhook_mapping_table(
    record: str, extra: dict[str, Any], status: ObservedStatus, code: RejectCode | None
) -> None:
    adapter = make_adapter(PostmarkFake())
    event = postmark_event(record, "883953f4-6105-42a2-a16a-77a8eac79483", "k:attempt:1", **extra)
    headers = {"Authorization": basic(HOOK_USER, HOOK_PASSWORD)}
    [observation] = adapter.verify_webhook(
        WebhookRequest("POST", "https://t/", headers, json.dumps(event).encode())
    )
    assert (observation.status, observation.code) == (status, code and code.value)
    assert observation.attempt_key == "k:attempt:1"
    assert observation.occurred_at is None or observation.occurred_at.utcoffset() is not None


def test_lookup_follows_message_events(fake: PostmarkFake) -> None:
    adapter = make_adapter(fake)
    message = OutboundMessage("email", "x@example.test", "x")
    fake.outcomes["x@example.test"] = "undeliverable"
    sent = adapter.send(message, "k:attempt:9")
    first = adapter.status(sent.provider_message_id)
    assert (first.raw_status, first.status) == ("Sent", ObservedStatus.accepted)
    assert first.attempt_key == "k:attempt:9"
    fake.settle()
    final = adapter.status(sent.provider_message_id)
    assert (final.raw_status, final.status, final.code) == (
        "Transient",
        ObservedStatus.undelivered,
        "BOUNCED",
    )
    assert final.dedupe_key != first.dedupe_key


# --- webhook credentials ----------------------------------------------------------


@pytest.mark.parametrize(
    "header",
    [None, "", "Bearer abc", basic(HOOK_USER, "nope"), basic("other", HOOK_PASSWORD), "Basic !!!"],
)
def test_bad_or_missing_credentials_are_refused(header: str | None) -> None:
    adapter = make_adapter(PostmarkFake())
    headers = {} if header is None else {"Authorization": header}
    body = json.dumps(postmark_event("Delivery", "m", "k")).encode()
    with pytest.raises(InvalidSignature):
        adapter.verify_webhook(WebhookRequest("POST", "https://t/", headers, body))


def test_without_configured_credentials_webhooks_are_a_config_error() -> None:
    adapter = PostmarkAdapter(TOKEN)
    headers = {"Authorization": basic(HOOK_USER, HOOK_PASSWORD)}
    with pytest.raises(ProviderConfigError):
        adapter.verify_webhook(WebhookRequest("POST", "https://t/", headers, b"{}"))


def test_built_from_settings_and_secrets_stay_out_of_repr() -> None:
    adapter = build(
        "postmark",
        {
            "server_token": TOKEN,
            "from": "a@b.test",
            "message_stream": "outbound",
            "broadcast_stream": "news",
            "webhook_username": HOOK_USER,
            "webhook_password": HOOK_PASSWORD,
        },
    )
    assert isinstance(adapter, PostmarkAdapter)
    assert TOKEN not in repr(adapter) and HOOK_PASSWORD not in repr(adapter)


# --- reconciliation: the search by our reference --------------------------------


def test_a_lost_answer_is_found_by_our_key_in_the_outbound_search(fake: PostmarkFake) -> None:
    adapter = make_adapter(fake)
    fake.outcomes["lost@example.test"] = "timeout"
    lost = adapter.send(OutboundMessage("email", "lost@example.test", "x"), "tdg:lost:1")
    assert not isinstance(lost, Accepted)
    adapter.send(OutboundMessage("email", "other@example.test", "x"), "tdg:other:1")
    [found] = adapter.find_by_reference("email", "tdg:lost:1")
    [message_id] = [i for i, m in fake.messages.items() if m["payload"]["To"].startswith("lost")]
    assert found.provider_message_id == message_id and found.attempt_key == "tdg:lost:1"
    assert found.status is ObservedStatus.accepted and found.created_at is not None
    params = dict(fake.requests[-1].url.params)
    assert params == {"count": "50", "offset": "0", "metadata_tidings_key_0": "tdg:lost:1"}
    assert adapter.find_by_reference("email", "tdg:never:1") == []


def test_a_key_longer_than_one_field_is_searched_by_its_first_part_and_kept_whole(
    fake: PostmarkFake,
) -> None:
    adapter = make_adapter(fake)
    prefix = "intent-" + "x" * 80
    for n in (1, 2):
        adapter.send(OutboundMessage("email", f"r{n}@example.test", "x"), f"{prefix}:{n}")
    [found] = adapter.find_by_reference("email", f"{prefix}:2")
    assert found.attempt_key == f"{prefix}:2"
