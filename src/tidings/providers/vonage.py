"""Vonage SMS API (``POST /sms/json``) and its signed delivery receipts.

The SMS API answers HTTP 200 whatever happened: the outcome is each
``messages[].status`` ("0" accepted, "1" throttled, others refused). A long
text is split and every part gets its own message id; if some parts went
and others did not, the outcome is Indeterminate (a resend would duplicate
the parts that went). Our attempt key rides in ``client-ref`` (at most 40
characters: compacted, a digest for keys of another format) and comes back in every receipt, which
matters because receipts of later parts carry those parts' own ids.

Receipts are signed with the account's signature secret in the ``sig``
parameter. Vonage's algorithm: every parameter but ``sig``, sorted by name,
concatenated as ``&name=value`` with ``&`` and ``=`` inside values replaced
by ``_``; then either MD5 of that string followed by the secret ("md5hash",
Vonage's default) or an HMAC keyed by the secret (md5, sha1, sha256, sha512).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, ClassVar
from urllib.parse import parse_qsl

import httpx

from tidings.domain.redaction import REDACTED
from tidings.domain.segments import is_gsm7
from tidings.providers import settings as cfg
from tidings.providers.base import (
    DEFAULT_TIMEOUT,
    HttpProviderAdapter,
    HttpRequest,
    same_digest,
    stable_key,
)
from tidings.providers.correlation import compact, expand
from tidings.providers.errors import InvalidSignature, ProviderConfigError
from tidings.providers.messages import OutboundMessage, WebhookRequest
from tidings.providers.outcomes import (
    Accepted,
    Indeterminate,
    Observation,
    ObservedStatus,
    RejectCode,
    Rejected,
    Retryable,
    SendResult,
)
from tidings.providers.registry import register

DEFAULT_BASE_URL = "https://rest.nexmo.com"
# "Client reference of up to 40 characters" (Vonage's API specification,
# ClientRef); our attempt key travels compacted (providers/correlation.py).
CLIENT_REF_LIMIT = 40
TTL_RANGE_MS = (20_000, 604_800_000)
SIGNATURE_METHODS = ("md5hash", "md5", "sha1", "sha256", "sha512")
# Send statuses that certainly sent nothing and may succeed later.
RETRY_STATUSES: Mapping[str, RejectCode] = {
    "1": RejectCode.RATE_LIMITED,  # throttled
    "9": RejectCode.PROVIDER_ERROR,  # partner quota: out of credit until topped up
    "10": RejectCode.RATE_LIMITED,  # too many existing binds: back off
}
UNKNOWN_STATUSES = frozenset({"5"})  # "internal error": it may or may not have gone
# Receipt err-codes Vonage documents as "retry": a later attempt may reach the handset.
TEMPORARY_ERRORS = frozenset({"2", "7", "8"})


class VonageAdapter(HttpProviderAdapter):
    name = "vonage"
    channels = frozenset({"sms"})
    status_map: ClassVar[Mapping[str, ObservedStatus]] = {
        "accepted": ObservedStatus.accepted,
        "buffered": ObservedStatus.accepted,
        "delivered": ObservedStatus.delivered,
        "expired": ObservedStatus.undelivered,
        "failed": ObservedStatus.failed,  # temporary err-codes: see map_status
        "rejected": ObservedStatus.failed,
    }
    code_map: ClassVar[Mapping[str, RejectCode]] = {
        # send statuses (the "status" of messages[] in the response)
        # Send statuses per Vonage's SMS API error table
        # (developer.vonage.com/en/messaging/sms/guides/troubleshooting-sms).
        "2": RejectCode.REQUEST_INVALID,  # missing parameters
        "3": RejectCode.REQUEST_INVALID,  # invalid parameters: about the request, not "to"
        "4": RejectCode.AUTH_FAILED,
        "6": RejectCode.INVALID_DESTINATION,  # unrecognised number prefix
        "7": RejectCode.OPTED_OUT,  # number barred (blacklisted)
        "8": RejectCode.AUTH_FAILED,  # partner account barred
        "11": RejectCode.AUTH_FAILED,  # account not enabled for HTTP
        "12": RejectCode.CONTENT_REJECTED,  # message too long
        "14": RejectCode.AUTH_FAILED,  # invalid signature
        "15": RejectCode.SENDER_REJECTED,  # a non-authorized sender ID in `from`
        # The `network-code` parameter we supplied, not the number (#37): it
        # must never suppress the recipient.
        "22": RejectCode.REQUEST_INVALID,
        "23": RejectCode.REQUEST_INVALID,  # invalid callback URL
        "29": RejectCode.ACCOUNT_RESTRICTED,  # non-whitelisted destination: a demo account's list
        "32": RejectCode.AUTH_FAILED,
        "33": RejectCode.INVALID_DESTINATION,  # number de-activated
    }
    # Delivery receipt err-codes, kept apart: the same numbers mean other things.
    receipt_codes: ClassVar[Mapping[str, RejectCode]] = {
        "1": RejectCode.UNKNOWN,
        "2": RejectCode.UNREACHABLE,  # absent subscriber, temporary
        "3": RejectCode.INVALID_DESTINATION,  # absent subscriber, permanent
        "4": RejectCode.OPTED_OUT,  # call barred by user
        "5": RejectCode.INVALID_DESTINATION,  # portability error
        "6": RejectCode.CARRIER_FILTERED,  # anti-spam rejection
        "7": RejectCode.UNREACHABLE,  # handset busy
        "8": RejectCode.UNREACHABLE,  # network error
        "9": RejectCode.OPTED_OUT,  # illegal number: user asked not to receive
        "10": RejectCode.CONTENT_REJECTED,  # illegal message
        "11": RejectCode.UNREACHABLE,  # unroutable
        "12": RejectCode.UNREACHABLE,  # destination unreachable
        "13": RejectCode.CARRIER_FILTERED,  # subscriber age restriction
        "14": RejectCode.CARRIER_FILTERED,  # number blocked by carrier
        "15": RejectCode.NOT_SMS_CAPABLE,  # prepaid, insufficient funds
        "16": RejectCode.RATE_LIMITED,  # gateway quota exceeded
        "50": RejectCode.CARRIER_FILTERED,  # entity filter
        "51": RejectCode.CARRIER_FILTERED,  # header filter
        "52": RejectCode.CARRIER_FILTERED,  # content filter
        "53": RejectCode.CARRIER_FILTERED,  # consent filter
        "54": RejectCode.CARRIER_FILTERED,  # regulation error
        "99": RejectCode.UNKNOWN,  # general error
    }

    def __init__(
        self,
        api_key: str,
        api_secret: str,
        *,
        sender: str | None = None,
        signature_secret: str | None = None,
        signature_method: str = "md5hash",
        signature_tolerance_s: float | None = 300.0,
        callback_url: str | None = None,
        base_url: str = DEFAULT_BASE_URL,
        timeout: float = DEFAULT_TIMEOUT,
        client: httpx.Client | None = None,
        clock: Callable[[], float] = time.time,
    ):
        super().__init__(base_url, timeout=timeout, client=client)
        if signature_method not in SIGNATURE_METHODS:
            raise ProviderConfigError(f"vonage signature_method must be one of {SIGNATURE_METHODS}")
        self._credentials = {"api_key": api_key, "api_secret": api_secret}
        self._sender = sender
        self._signature = (signature_secret, signature_method)
        self._tolerance_s = signature_tolerance_s
        self._callback_url = callback_url
        self._clock = clock

    def __repr__(self) -> str:
        return f"VonageAdapter(sender={self._sender!r})"

    # --- send ---------------------------------------------------------------

    def build_request(self, message: OutboundMessage, idempotency_key: str) -> HttpRequest:
        sender = message.sender or self._sender
        if not sender:
            raise ProviderConfigError("vonage needs a sender: set 'from' or the message sender")
        data = {
            "from": sender,
            "to": message.to.lstrip("+"),  # the SMS API wants digits only
            "text": message.body,
            "type": "text" if is_gsm7(message.body) else "unicode",
            "client-ref": compact(idempotency_key, CLIENT_REF_LIMIT),
        }
        if self._callback_url:
            data |= {"status-report-req": "1", "callback": self._callback_url}
        if message.validity_seconds is not None:
            low, high = TTL_RANGE_MS
            data["ttl"] = str(min(max(message.validity_seconds * 1000, low), high))
        return HttpRequest("POST", "/sms/json", data=data)

    def transmit(self, request: HttpRequest) -> httpx.Response:
        # Credentials join the form only here, so no HttpRequest (which has a
        # repr, and may be logged) ever holds the API secret.
        if request.method == "POST":
            request = replace(request, data={**(request.data or {}), **self._credentials})
        return super().transmit(request)

    def parse_accepted(self, response: httpx.Response) -> Accepted:
        # parse_response reads every 200 itself; any other 2xx is unexpected.
        raise ValueError(f"unexpected HTTP {response.status_code} from the SMS API")

    def parse_response(self, response: httpx.Response) -> SendResult:
        if response.status_code != 200:
            return super().parse_response(response)
        try:
            parts = [(str(p["status"]), p) for p in response.json()["messages"]]
        except (ValueError, KeyError, TypeError):
            return Indeterminate(RejectCode.PROVIDER_ERROR, "unreadable SMS API answer", 200)
        if not parts:
            return Indeterminate(RejectCode.PROVIDER_ERROR, "SMS API answered no messages", 200)
        return self._outcome(parts)

    def _outcome(self, parts: list[tuple[str, Mapping[str, Any]]]) -> SendResult:
        sent = [p for status, p in parts if status == "0"]
        if len(sent) == len(parts):
            return Accepted(str(sent[0]["message-id"]), raw_status="0")
        status, first = next((s, p) for s, p in parts if s != "0")
        detail = f"status {status}: {first.get('error-text', '')}"
        if sent or status in UNKNOWN_STATUSES:
            return Indeterminate(RejectCode.PROVIDER_ERROR, detail, 200)
        if status in RETRY_STATUSES:
            return Retryable(RETRY_STATUSES[status], None, detail, 200)
        return Rejected(self.map_code(status), detail, 200, provider_code=status)

    # --- delivery receipts --------------------------------------------------

    @classmethod
    def map_status(cls, raw_status: str, raw_code: str | None) -> tuple[ObservedStatus, str | None]:
        status = cls.status_map.get(raw_status.lower(), ObservedStatus.unknown)
        if raw_code is None:
            return status, None
        if status is ObservedStatus.failed and raw_code in TEMPORARY_ERRORS:
            status = ObservedStatus.undelivered  # Vonage documents these as "retry"
        return status, cls.receipt_codes.get(raw_code, RejectCode.UNKNOWN).value

    def verify_webhook(self, request: WebhookRequest) -> list[Observation]:
        params = {**request.query, **_body_params(request)}
        self._check_signature(params)
        if "messageId" not in params or "status" not in params:
            return []  # an inbound message, not a receipt
        return [self._observation(params)]

    def _check_signature(self, params: Mapping[str, str]) -> None:
        secret, method = self._signature
        if not secret:
            raise ProviderConfigError("vonage adapter has no signature_secret")
        given = params.get("sig")
        if not given:
            raise InvalidSignature("vonage receipt is not signed")
        expected = signature(params, secret, method)
        if not same_digest(expected.lower(), given.lower()):
            raise InvalidSignature("vonage signature mismatch")
        self._check_fresh(params.get("timestamp", ""))

    def _check_fresh(self, stamp: str) -> None:
        if self._tolerance_s is None:
            return
        if (
            not (stamp.isascii() and stamp.isdigit())
            or abs(self._clock() - int(stamp)) > self._tolerance_s
        ):
            raise InvalidSignature("vonage signature timestamp outside tolerance")

    def _observation(self, params: Mapping[str, str]) -> Observation:
        raw_status = params["status"]
        err = params.get("err-code")
        raw_code = None if err in (None, "", "0") else err
        status, code = self.map_status(raw_status, raw_code)
        # msisdn is the recipient: mask it here, the shared redaction knows no such key.
        raw = {**params, "msisdn": REDACTED} if "msisdn" in params else dict(params)
        return Observation(
            provider=self.name,
            provider_message_id=params["messageId"],
            attempt_key=expand(params.get("client-ref")),
            status=status,
            code=code,
            raw_status=raw_status,
            occurred_at=_utc(params.get("message-timestamp")),
            dedupe_key=stable_key(
                self.name, params["messageId"], raw_status, err, params.get("scts")
            ),
            raw=raw,
            raw_code=raw_code,
        )


def signature(params: Mapping[str, str], secret: str, method: str = "md5hash") -> str:
    """Vonage's request signature (lower-case hex) over every parameter but `sig`."""
    text = "".join(
        f"&{name}={str(params[name]).replace('&', '_').replace('=', '_')}"
        for name in sorted(params)
        if name != "sig"
    )
    if method == "md5hash":
        return hashlib.md5(
            (text + secret).encode()
        ).hexdigest()  # MD5: Vonage's scheme, not our choice
    return hmac.new(secret.encode(), text.encode(), method).hexdigest()


def _body_params(request: WebhookRequest) -> dict[str, str]:
    if not request.body:
        return {}
    content_type = request.headers.get("Content-Type", "")
    if "json" in content_type or request.body.lstrip().startswith(b"{"):
        try:
            body = json.loads(request.body)
        except ValueError:
            raise InvalidSignature("vonage receipt body is not JSON") from None
        return {str(k): str(v) for k, v in body.items()} if isinstance(body, dict) else {}
    return dict(parse_qsl(request.body.decode("utf-8", "replace"), keep_blank_values=True))


def _utc(value: str | None) -> datetime | None:
    # "2018-10-25 12:10:29", in UTC
    try:
        return datetime.strptime(value or "", "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        return None


def _from_settings(settings: Mapping[str, Any]) -> VonageAdapter:
    tolerance = cfg.number(settings, "signature_tolerance_s", 300.0, "vonage")
    return VonageAdapter(
        cfg.required(settings, "api_key", "vonage"),
        cfg.required(settings, "api_secret", "vonage"),
        sender=cfg.optional(settings, "from"),
        signature_secret=cfg.optional(settings, "signature_secret"),
        signature_method=cfg.optional(settings, "signature_method", "md5hash") or "md5hash",
        signature_tolerance_s=tolerance if tolerance > 0 else None,
        callback_url=cfg.optional(settings, "callback_url"),
        base_url=cfg.optional(settings, "base_url", DEFAULT_BASE_URL) or DEFAULT_BASE_URL,
        timeout=cfg.timeout(settings, "vonage"),
    )


register("vonage", _from_settings)
