"""Verifying Amazon SNS HTTP(S) messages (shared by the SES and AWS SMS adapters).

SNS signs each message with an RSA key whose X.509 certificate it publishes
at ``SigningCertURL``: SignatureVersion 1 is SHA1withRSA, version 2 is
SHA256withRSA, over "Name\\nValue\\n" lines of a fixed field list in byte
order. Anyone can sign a message with their own certificate, so the trust
anchor is the certificate's *location*: only https URLs whose host is an
SNS endpoint (``sns.<region>.amazonaws.com[.cn]``, exactly: other hosts
under amazonaws.com, an S3 bucket's say, are anyone's) are fetched (TLS
then proves the host), and the certificate must name SNS and be within its
validity period. That is what AWS's own message validators check; we do
not walk the CA chain.

A valid signature proves only that SNS sent the message, and any AWS
account can make SNS post to our URL: the topics we subscribed are pinned
(a verifier with none accepts nothing), and a message older than
``max_age_seconds`` (by its signed Timestamp) is refused as a replay.
A certificate that cannot be fetched is ProviderUnavailable, not a bad
signature, so the webhook answers 5xx and SNS retries.

The simulator (simulator/wire_aws_events.py) signs with a self-signed
certificate it serves itself: a verifier trusts such a URL only when it is
named, exactly, in ``trusted_cert_urls`` (setting ``sns_trusted_cert_urls``),
which is for the simulator and tests alone and empty by default. Every other
check (topic, age, signature, the certificate's name and validity) still runs.

Certificates are cached per URL: SNS reuses them for months, and a webhook
burst must not become a burst of certificate downloads.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
from cryptography import x509
from cryptography.exceptions import InvalidSignature as CryptoInvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

from tidings.providers import settings as cfg
from tidings.providers.base import DEFAULT_TIMEOUT
from tidings.providers.errors import (
    InvalidSignature,
    ProviderConfigError,
    ProviderError,
    ProviderUnavailable,
)

CertFetcher = Callable[[str], bytes]

_HASHES: Mapping[str, Callable[[], hashes.HashAlgorithm]] = {"1": hashes.SHA1, "2": hashes.SHA256}
# Which fields are signed, in this order, per message type (SNS docs).
_NOTIFICATION_FIELDS = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
_SUBSCRIPTION_FIELDS = (
    "Message",
    "MessageId",
    "SubscribeURL",
    "Timestamp",
    "Token",
    "TopicArn",
    "Type",
)
_SIGNED_FIELDS = {
    "Notification": _NOTIFICATION_FIELDS,
    "SubscriptionConfirmation": _SUBSCRIPTION_FIELDS,
    "UnsubscribeConfirmation": _SUBSCRIPTION_FIELDS,
}
_CACHE_LIMIT = 32
# The SNS endpoints, in every partition; `hostname` is already lower-case.
_SNS_HOST = re.compile(r"sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?")
# SNS retries an HTTP delivery for up to an hour by default; a message is
# signed once, so its Timestamp ages across the retries.
DEFAULT_MAX_AGE_SECONDS = 3600.0
# How far ahead of our clock a Timestamp may be (clock skew).
FUTURE_SKEW_SECONDS = 300.0


@dataclass(frozen=True)
class SnsMessage:
    """A verified SNS message; `message` is the publisher's payload, still a string."""

    type: str
    message_id: str
    topic_arn: str
    message: str
    timestamp: str
    subject: str | None = None
    subscribe_url: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)


def is_sns_cert_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    return (
        parts.scheme == "https"
        and _SNS_HOST.fullmatch(parts.hostname or "") is not None
        and port in (None, 443)
        and not parts.username
        and not parts.password
        and parts.path.endswith(".pem")
    )


def fetch_certificate(url: str, timeout: float = DEFAULT_TIMEOUT) -> bytes:
    """The default fetcher: plain HTTPS GET, certificate-validated by httpx."""
    response = httpx.get(url, timeout=timeout, follow_redirects=False)
    response.raise_for_status()
    return response.content


class SnsVerifier:
    """Checks SNS message signatures, from the pinned `topic_arns` only.

    With no topic configured nothing is accepted (ProviderConfigError: the
    webhook is not set up), rather than every topic of every AWS account.
    """

    def __init__(
        self,
        *,
        cert_fetcher: CertFetcher | None = None,
        topic_arns: Iterable[str] = (),
        clock: Callable[[], float] = time.time,
        max_age_seconds: float = DEFAULT_MAX_AGE_SECONDS,
        trusted_cert_urls: Iterable[str] = (),
    ):
        self._fetch = cert_fetcher or fetch_certificate
        self._trusted_urls = frozenset(trusted_cert_urls)
        self._topics = frozenset(topic_arns)
        self._clock = clock
        self._max_age = max_age_seconds
        self._certs: dict[str, x509.Certificate] = {}
        self._lock = threading.Lock()

    def verify(self, body: bytes) -> SnsMessage:
        if not self._topics:
            raise ProviderConfigError("no SNS topic ARN is configured (*_SNS_TOPIC_ARNS)")
        doc = _parse(body)
        signed = _signed_fields(doc)
        signature = _signature(doc)
        digest = _HASHES.get(str(doc.get("SignatureVersion", "")))
        if digest is None:
            raise InvalidSignature("unsupported SNS SignatureVersion")
        # Both are signed fields, so checking them first only saves a
        # certificate fetch for messages that would be refused anyway.
        self._check_topic(str(doc.get("TopicArn", "")))
        self._check_age(doc.get("Timestamp"))
        public_key = self._public_key(str(doc.get("SigningCertURL", "")))
        try:
            public_key.verify(signature, _string_to_sign(doc, signed), padding.PKCS1v15(), digest())
        except CryptoInvalidSignature:
            raise InvalidSignature("SNS signature mismatch") from None
        return _message(doc)

    def notification(self, body: bytes) -> Any | None:
        """The verified JSON payload of a Notification; None for (un)subscription messages.

        Subscription confirmations are verified too, then left to the operator:
        fetching a URL named by an inbound request is not a webhook's job.
        """
        message = self.verify(body)
        if message.type != "Notification":
            return None
        try:
            return json.loads(message.message)
        except ValueError:
            raise ProviderError("SNS notification payload is not JSON") from None

    def _check_topic(self, topic_arn: str) -> None:
        # A valid signature only proves SNS sent it; any AWS account can make
        # SNS send to our URL. Pinning topics keeps strangers' events out.
        if topic_arn not in self._topics:
            raise InvalidSignature("SNS message from an unexpected topic")

    def _check_age(self, stamp: object) -> None:
        try:
            at = datetime.fromisoformat(stamp) if isinstance(stamp, str) else None
        except ValueError:
            at = None
        if at is None or at.utcoffset() is None:
            raise InvalidSignature("SNS message has no readable Timestamp")
        age = self._clock() - at.timestamp()
        if age > self._max_age:
            raise InvalidSignature("SNS message Timestamp is too old (a replay?)")
        if age < -FUTURE_SKEW_SECONDS:
            raise InvalidSignature("SNS message Timestamp is in the future")

    def _public_key(self, url: str) -> rsa.RSAPublicKey:
        if not (is_sns_cert_url(url) or url in self._trusted_urls):
            raise InvalidSignature("SNS SigningCertURL is not an https amazonaws.com SNS URL")
        cert = self._certificate(url)
        self._check_certificate(cert)
        key = cert.public_key()
        if not isinstance(key, rsa.RSAPublicKey):
            raise InvalidSignature("SNS certificate does not hold an RSA key")
        return key

    def _certificate(self, url: str) -> x509.Certificate:
        with self._lock:
            cached = self._certs.get(url)
        if cached is not None:
            return cached
        try:
            cert = x509.load_pem_x509_certificate(self._fetch(url))
        except (httpx.HTTPError, OSError) as exc:
            # Not the sender's fault, maybe: the caller answers 5xx so SNS retries.
            raise ProviderUnavailable(f"could not fetch SNS certificate: {exc!r}") from exc
        except ValueError:
            raise InvalidSignature("SNS SigningCertURL did not return a certificate") from None
        with self._lock:
            if len(self._certs) >= _CACHE_LIMIT:
                self._certs.pop(next(iter(self._certs)))
            self._certs[url] = cert
        return cert

    def _check_certificate(self, cert: x509.Certificate) -> None:
        now = datetime.fromtimestamp(self._clock(), UTC)
        if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
            raise InvalidSignature("SNS certificate is outside its validity period")
        names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        if not any(str(n.value).startswith("sns.") for n in names):
            raise InvalidSignature("SNS certificate is not issued to an SNS host")


def sns_verifier_from(settings: Mapping[str, Any], provider: str) -> SnsVerifier:
    """The verifier of `provider`'s settings: `sns_topic_arns` (comma-separated;
    none, and its webhooks are refused), `sns_max_age_seconds`, and
    `sns_trusted_cert_urls` (the simulator's certificate URL; tests only)."""
    return SnsVerifier(
        topic_arns=cfg.words(settings, "sns_topic_arns"),
        max_age_seconds=cfg.number(
            settings, "sns_max_age_seconds", DEFAULT_MAX_AGE_SECONDS, provider
        ),
        trusted_cert_urls=cfg.words(settings, "sns_trusted_cert_urls"),
    )


def _parse(body: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(body)
    except ValueError:
        raise InvalidSignature("SNS message is not JSON") from None
    if not isinstance(doc, dict):
        raise InvalidSignature("SNS message is not a JSON object")
    return doc


def _signed_fields(doc: Mapping[str, Any]) -> tuple[str, ...]:
    fields = _SIGNED_FIELDS.get(str(doc.get("Type")))
    if fields is None:
        raise InvalidSignature("unknown SNS message Type")
    return fields


def _signature(doc: Mapping[str, Any]) -> bytes:
    value = doc.get("Signature")
    if not value or not isinstance(value, str):
        raise InvalidSignature("SNS message is not signed")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidSignature("SNS Signature is not base64") from None


def _string_to_sign(doc: Mapping[str, Any], fields: tuple[str, ...]) -> bytes:
    lines = []
    for name in fields:
        if name == "Subject" and doc.get(name) is None:
            continue  # the only optional signed field: omitted entirely when absent
        if not isinstance(doc.get(name), str):
            raise InvalidSignature(f"SNS message lacks {name}")
        lines.append(f"{name}\n{doc[name]}\n")
    return "".join(lines).encode()


def _message(doc: Mapping[str, Any]) -> SnsMessage:
    return SnsMessage(
        type=doc["Type"],
        message_id=doc["MessageId"],
        topic_arn=doc["TopicArn"],
        message=doc["Message"],
        timestamp=doc["Timestamp"],
        subject=doc.get("Subject"),
        subscribe_url=doc.get("SubscribeURL"),
        raw=doc,
    )
