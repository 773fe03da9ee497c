"""Carrying our attempt key in a provider's correlation field, and back.

An event that names our attempt key can settle an attempt whose send ended
Indeterminate, before we ever learned the provider's message id; so the key
should travel whole wherever the provider lets it. Providers bound these
fields: SES tags allow 256 characters of ``[A-Za-z0-9_-]``, Postmark metadata
values 80 characters, Vonage ``client-ref`` 100. Three ways to fit:

- ``escape_tag``: a reversible escaping into a restricted alphabet (SES).
- ``chunk``: split over several fields (Postmark allows ten).
- ``carry``: as is when it fits, else a digest; a digest cannot be turned
  back into the key, so such events match by provider message id only.
- ``compact``: our attempt key (``tdg:<uuid>:<n>``, 42 characters for a
  one-digit n) as ``t:<the uuid's 16 bytes in base64url>:<n>`` (25 + digits
  of n), unique and reversible, for fields as short as Vonage's 40.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Mapping
from uuid import UUID

from tidings.domain.keys import attempt_key, intent_of_attempt_key

DIGEST_PREFIX = "sha256-"
COMPACT_PREFIX = "t:"
_TAG_SAFE = re.compile(r"[A-Za-z0-9-]")


def carry(key: str, limit: int) -> str:
    if len(key) <= limit and not key.startswith(DIGEST_PREFIX):
        return key
    return DIGEST_PREFIX + hashlib.sha256(key.encode()).hexdigest()[: limit - len(DIGEST_PREFIX)]


def recover(value: object) -> str | None:
    """The key `carry` produced, or None when it had to travel as a digest."""
    if not isinstance(value, str) or not value or value.startswith(DIGEST_PREFIX):
        return None
    return value


def escape_tag(key: str) -> str:
    """Every byte outside [A-Za-z0-9-] becomes _XX; '_' is the escape, so it is escaped too."""
    return "".join(ch if _TAG_SAFE.fullmatch(ch) else _hex(ch) for ch in key)


def unescape_tag(value: object) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return _unhex(value)
    except (ValueError, UnicodeDecodeError):
        return None


def chunk(key: str, field: str, limit: int, max_fields: int) -> dict[str, str]:
    """`key` over fields named field_0, field_1, ...; a digest if it needs more than allowed."""
    if len(key) > limit * max_fields:
        key = carry(key, limit)
    parts = [key[i : i + limit] for i in range(0, len(key), limit)] or [""]
    return {f"{field}_{n}": part for n, part in enumerate(parts)}


def unchunk(fields: Mapping[str, object], field: str) -> str | None:
    parts = []
    for n in range(len(fields)):
        part = fields.get(f"{field}_{n}")
        if not isinstance(part, str):
            break
        parts.append(part)
    return recover("".join(parts))


def _hex(ch: str) -> str:
    return "".join(f"_{byte:02X}" for byte in ch.encode())


def _unhex(value: str) -> str:
    out = bytearray()
    i = 0
    while i < len(value):
        if value[i] == "_":
            out.append(int(value[i + 1 : i + 3], 16))
            i += 3
        else:
            out.extend(value[i].encode("ascii"))
            i += 1
    return out.decode()


def compact(key: str, limit: int) -> str:
    """Our attempt key in at most `limit` characters, reversible by
    `expand`; any other key (from before the attempt-key format) as `carry`."""
    intent = intent_of_attempt_key(key)
    if intent is None:
        return carry(key, limit)
    n = key.rpartition(":")[2]
    short = COMPACT_PREFIX + base64.urlsafe_b64encode(intent.bytes).decode().rstrip("=") + ":" + n
    return short if len(short) <= limit else carry(key, limit)


def expand(value: object) -> str | None:
    """The key `compact` carried, or None for a digest or a forged value."""
    if not isinstance(value, str) or not value.startswith(COMPACT_PREFIX):
        return recover(value)
    packed, _, n = value[len(COMPACT_PREFIX) :].partition(":")
    try:
        raw = base64.urlsafe_b64decode(packed + "==")
        return attempt_key(UUID(bytes=raw), int(n)) if n.isdigit() and len(packed) == 22 else None
    except (ValueError, binascii.Error):
        return None
