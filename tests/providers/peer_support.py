"""Building blocks for provider peers: HTTP fakes, SNS signing, botocore staging.

Everything here imitates the provider side only. Signatures are computed
from the providers' published algorithms, written out again here rather than
borrowed from the adapters, so that a mistake in an adapter cannot hide
behind the same mistake in its test.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

# --- HTTP fakes ---------------------------------------------------------------


class FakeHttpProvider:
    """An httpx transport that plays one provider; subclasses route requests.

    Outcomes are staged per destination (the peer knows which destination it
    handed out for which outcome), requests are recorded per attempt key.
    """

    def __init__(self) -> None:
        self.outcomes: dict[str, str] = {}
        self.requests: list[httpx.Request] = []
        self.keys: Counter[str] = Counter()

    def client(self, base_url: str) -> httpx.Client:
        return httpx.Client(base_url=base_url, transport=httpx.MockTransport(self.handle))

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.route(request)

    def route(self, request: httpx.Request) -> httpx.Response:
        raise NotImplementedError

    def record(self, key: str | None) -> None:
        if key:
            self.keys[key] += 1

    @staticmethod
    def stall(request: httpx.Request) -> httpx.Response:
        # The provider took it and recorded it; its answer never reaches us.
        raise httpx.ReadTimeout("stalled after accepting", request=request)


def new_id(prefix: str = "") -> str:
    return prefix + uuid.uuid4().hex


# --- SNS --------------------------------------------------------------------

CERT_URL = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0000000000.pem"
TOPIC_ARN = "arn:aws:sns:us-east-1:123456789012:tidings-events"
_SIGNED = {
    "Notification": ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"),
    "SubscriptionConfirmation": (
        "Message",
        "MessageId",
        "SubscribeURL",
        "Timestamp",
        "Token",
        "TopicArn",
        "Type",
    ),
}


class SnsSigner:
    """Plays SNS: a locally generated RSA key and certificate signing SNS-shaped messages."""

    def __init__(self, common_name: str = "sns.amazonaws.com") -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.cert_pem = _certificate(self.key, common_name)
        self.fetched: list[str] = []

    def fetch(self, url: str) -> bytes:
        self.fetched.append(url)
        if url != CERT_URL:
            raise httpx.ConnectError(f"no certificate served at {url}")
        return self.cert_pem

    def message(
        self,
        payload: Any,
        *,
        message_id: str | None = None,
        kind: str = "Notification",
        version: str = "2",
        key: rsa.RSAPrivateKey | None = None,
        cert_url: str = CERT_URL,
        topic_arn: str = TOPIC_ARN,
        timestamp: datetime | None = None,
        **extra: str,
    ) -> dict[str, Any]:
        # SNS stamps the time it published the message (verifiers refuse old ones).
        at = timestamp or datetime.now(UTC)
        doc: dict[str, Any] = {
            "Type": kind,
            "MessageId": message_id or str(uuid.uuid4()),
            "TopicArn": topic_arn,
            "Message": payload if isinstance(payload, str) else json.dumps(payload),
            "Timestamp": at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z",
            "SignatureVersion": version,
            "SigningCertURL": cert_url,
            "UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
            **extra,
        }
        digest = hashes.SHA1() if version == "1" else hashes.SHA256()
        signed = (key or self.key).sign(_string_to_sign(doc), padding.PKCS1v15(), digest)
        doc["Signature"] = base64.b64encode(signed).decode()
        return doc


def _string_to_sign(doc: Mapping[str, Any]) -> bytes:
    # "Verifying the signatures of Amazon SNS messages": name, newline, value,
    # newline, for the type's fields in this order; Subject only when present.
    names = [n for n in _SIGNED[doc["Type"]] if n in doc]
    return "".join(f"{name}\n{doc[name]}\n" for name in names).encode()


def _certificate(key: rsa.RSAPrivateKey, common_name: str) -> bytes:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


# --- botocore -----------------------------------------------------------------

Destination = Callable[[str, Mapping[str, Any]], str | None]


class BotoStage:
    """Stages outcomes on one boto3 client through botocore's own events.

    - an error staged for (operation, destination) is answered before the
      request leaves (``before-call``): the provider never saw it;
    - a timeout staged for (operation, destination) is raised after the
      provider answered (``after-call``): it did see it, we never hear;
    - every call's API parameters are recorded (``before-parameter-build``).
    """

    def __init__(self, client: Any, destination: Destination):
        self._destination = destination
        self.errors: dict[tuple[str, str], tuple[str, int, dict[str, Any]]] = {}
        self.timeouts: set[tuple[str, str]] = set()
        self.calls: list[tuple[str, dict[str, Any]]] = []
        events = client.meta.events
        events.register("before-parameter-build", self._params)
        events.register("before-call", self._before)
        events.register("after-call", self._after)

    def error(self, operation: str, destination: str, code: str, http: int = 400, **fields: Any):
        self.errors[(operation, destination)] = (code, http, fields)

    def timeout(self, operation: str, destination: str) -> None:
        self.timeouts.add((operation, destination))

    def count(self, operation: str, predicate: Callable[[dict[str, Any]], bool]) -> int:
        return sum(1 for op, params in self.calls if op == operation and predicate(params))

    def _params(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any):
        self.calls.append((model.name, dict(params)))
        context["staged"] = (model.name, self._destination(model.name, params) or "")

    def _before(self, model: Any, context: dict[str, Any], **_: Any) -> Any:
        staged = self.errors.get(context.get("staged", ("", "")))
        if staged is None:
            return None
        code, http, fields = staged
        parsed = {
            "Error": {"Code": code, "Message": f"staged {code}"},
            "ResponseMetadata": {"HTTPStatusCode": http},
            **fields,
        }
        return AWSResponse("https://staged.invalid", http, {}, None), parsed

    def _after(self, context: dict[str, Any], **_: Any) -> None:
        if context.get("staged") in self.timeouts:
            raise ReadTimeoutError(endpoint_url="https://staged.invalid")
