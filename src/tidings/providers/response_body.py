"""What a provider said when it did not accept a send, kept on the attempt.

The body of a refusal (a 4xx naming the field it disliked, a 5xx page) is
the evidence on-call needs, and the provider may not keep it. It can echo
the destination or a credential back, so it is redacted first (JSON by key
and value as everywhere else, other text for e-mail addresses and phone
numbers) and only then cut to MAX_BODY_BYTES, so a cut never leaves half an
address unredacted. It is stored in ``attempts.response_body``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Final

import httpx

from tidings.domain.redaction import redact_text, redact_value
from tidings.providers.outcomes import Accepted, SendResult

MAX_BODY_BYTES: Final = 2048
# Read no further than this: a provider's error page can be megabytes.
_READ_CHARS: Final = 64 * 1024


def kept_body(text: str) -> str | None:
    """``text`` redacted, then bounded to MAX_BODY_BYTES of UTF-8; None if empty."""
    raw = text[:_READ_CHARS]
    if not raw.strip():
        return None
    try:
        document: Any = json.loads(raw)
    except ValueError:
        redacted = redact_text(raw)
    else:
        redacted = json.dumps(redact_value(document), ensure_ascii=False, separators=(",", ":"))
    return bound(redacted)


def bound(text: str, limit: int = MAX_BODY_BYTES) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    # Cut at a byte limit without splitting a character.
    return data[:limit].decode("utf-8", "ignore")


def with_body(result: SendResult, response: object) -> SendResult:
    """``result`` carrying the redacted body of an HTTP answer that was not an acceptance."""
    if isinstance(result, Accepted) or not isinstance(response, httpx.Response):
        return result
    return replace(result, response_body=kept_body(response.text))
