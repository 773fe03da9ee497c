"""Pure redaction of personal data in text and structured values.

The one redactor of the project: the log pipeline runs every string of every
log line through it, provider adapters run the raw payload of every
observation and every error detail through it, the API runs problem details
through it. One set of rules, one placeholder style.

What is replaced in text:

* e-mail addresses -> ``<email>`` (also URL-encoded ``name%40host.tld``);
* phone numbers -> ``<phone>``: ``+`` followed by 7 or more digits (E.164,
  separators allowed: ``+49 30 1234 5678``, ``+1 (555) 123-4567``, even
  doubled ones: ``+49  30--1234``) and
  national formats *with separators* (``(555) 123-4567``, ``555-123-4567``,
  ``030 1234567``, ``0171/1234567``, ``555.123.4567``) with 7+ digits.

What is deliberately kept:

* UUIDs, ISO-8601 dates and timestamps, IPv4 addresses and calendar dates
  like ``01.05.2024`` / ``05/01/2024``;
* bare digit runs without ``+`` or separators (numeric ids, epoch seconds,
  attempt counts): a national number written without any separator is not
  recognisable and is not redacted - structured fields carrying destinations
  are dropped by key instead (see :data:`DROP_KEYS`);
* decimals (one ``.`` between two digit groups, e.g. ``1234.5678``);
* digit groups glued to a word or id (``k-1234-5678``, ``SM0123456789ab``,
  ``waitlist:771:1842:offer:1``).

:func:`redact_value` walks dicts/lists/tuples; a value under a key in
:data:`DROP_KEYS` (case-insensitive, ``-`` read as ``_``; also any key ending
in ``_token``, ``_password`` or ``_secret``) is replaced wholesale by
``<redacted>``.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import re
import uuid
from collections.abc import Callable, Collection, Mapping
from typing import Any, Final

EMAIL_PLACEHOLDER: Final[str] = "<email>"
PHONE_PLACEHOLDER: Final[str] = "<phone>"
REDACTED: Final[str] = "<redacted>"

DROP_KEYS: Final[frozenset[str]] = frozenset(
    {
        # the contract's list
        "body",
        "rendered",
        "token",
        "reset_link",
        "link",
        "password",
        "destination",
        "to",
        "phone",
        "email",
        # same data under other common names
        "html_body",
        "text_body",
        "variables",
        "phone_number",
        "email_address",
        "authorization",
        "api_key",
        "secret",
        "cc",
        "bcc",
        # destinations under the names providers give them
        "recipient",
        "address",
        "phonenumber",
        "destinationphonenumber",
    }
)
_DROP_SUFFIXES: Final[tuple[str, ...]] = ("_token", "_password", "_secret")

# Local part: every RFC 5322 atext character plus dots. Inside a URL this
# also swallows the path before the address ("https:<email>"), which errs on
# the side of hiding (paths may carry tokens too). Bounded repeats (RFC
# 5321 limits: 64 for the local part, 63 per label) keep matching linear.
_EMAIL = re.compile(
    r"[\w.!#$%&'*+/=?^`{|}~-]{1,64}(?:@|%40)"
    r"[^\W_](?:[\w-]{0,62}[^\W_])?(?:\.[^\W_](?:[\w-]{0,62}[^\W_])?)+",
)

# Spans that look numeric but are not phone numbers. They are protected from
# the phone pass (e-mail redaction runs first, over the whole text).
_PROTECTED = re.compile(
    r"""
    (?<![0-9A-Fa-f])[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}
        (?![0-9A-Fa-f])                                              # UUID
  | (?<!\d)[+-]?\d{4,6}-\d{2}-\d{2}                                   # ISO date ...
        (?:[T\ ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?                   # ... time
           (?:Z|[+-]\d{2}(?::?\d{2}(?::\d{2}(?:\.\d+)?)?)?(?!\d))?  # ... offset
        )?(?!\d)
  | (?<![\d.])\d{1,3}(?:\.\d{1,3}){3}(?![\d]|\.\d)                   # IPv4
  | (?<![\d./-])\d{1,2}([./-])\d{1,2}\1\d{2,4}(?![\d./-])            # dd.mm.yyyy
  | (?<![\d./-])\d{4}([./])\d{1,2}\2\d{1,2}(?![\d./-])               # yyyy/mm/dd
    """,
    re.VERBOSE,
)

# Phone candidates: an optional "+", then digit groups joined by single
# separators (space - . /) or parentheses. Possessive/atomic pieces keep the
# match linear: no backtracking over digit splits.
_PHONE = re.compile(
    r"""
    (?: \+ \ ?+                          # international: any left neighbour
      | (?<![\w+\-./])(?=[\d(])          # national: not glued to a token
    )
    (?>\(\d++\)|\d++)
    (?>[ \-./]?\(\d++\)|[ \-./]\d++|(?<=\))\d++)*+
    """,
    re.VERBOSE,
)
# International numbers written with irregular separators ("+49  30--1234"),
# which the pattern above stops at; judged by the same 7-digit rule, and
# tried first so that the national pass cannot leave the country code behind.
_LOOSE_INTERNATIONAL = re.compile(r"\+\d[\d \-]{6,}\d")
# The same in a URL's query string, its plus (and spaces) percent-encoded:
# an HTTP client logs the URL of a provider's search by number (Twilio's
# `Messages.json?To=%2B1...`), which the patterns above never see as a number.
_ENCODED_INTERNATIONAL = re.compile(r"%2[Bb]\d(?:%20|[\d\-.])*\d")
_DIGIT = re.compile(r"\d")
_SEPARATOR = re.compile(r"[ \-./()]")


def _looks_like_phone(text: str) -> bool:
    if len(_DIGIT.findall(text)) < 7:
        return False
    if text.startswith("+"):
        return True
    separators = _SEPARATOR.findall(text)
    if not separators:
        return False  # a bare number: an id, a count, an epoch
    return separators != ["."]  # one dot between two groups: a decimal


def _phone_repl(match: re.Match[str]) -> str:
    text = match.group(0)
    string = match.string
    end = match.end()
    tail = ""
    if (
        not text.startswith("+")
        and end < len(string)
        and (string[end].isalnum() or string[end] == "_")
    ):
        # The last group is glued to a word ("555-123-4567abc", "... 0A"):
        # it belongs to that word; judge what comes before its separator.
        cut = max(text.rfind(c) for c in " -./()")
        if cut <= 0:
            return text
        text, tail = text[:cut], text[cut:]
    if _looks_like_phone(text):
        return PHONE_PLACEHOLDER + tail
    return text + tail


def _loose_repl(match: re.Match[str]) -> str:
    text = match.group(0)
    return PHONE_PLACEHOLDER if len(_DIGIT.findall(text)) >= 7 else text


def _encoded_repl(match: re.Match[str]) -> str:
    text = match.group(0)
    digits = _DIGIT.findall(text[3:].replace("%20", ""))
    return PHONE_PLACEHOLDER if len(digits) >= 7 else text


def _redact_unprotected(text: str) -> str:
    if "%2" in text:
        text = _ENCODED_INTERNATIONAL.sub(_encoded_repl, text)
    return _PHONE.sub(_phone_repl, _LOOSE_INTERNATIONAL.sub(_loose_repl, text))


def _redact_phones(text: str) -> str:
    out: list[str] = []
    pos = 0
    for protected in _PROTECTED.finditer(text):
        out.append(_redact_unprotected(text[pos : protected.start()]))
        out.append(protected.group(0))
        pos = protected.end()
    out.append(_redact_unprotected(text[pos:]))
    return "".join(out)


def _has_seven_digits(text: str) -> bool:
    count = 0
    for ch in text:
        if ch.isdigit():
            count += 1
            if count >= 7:
                return True
    return False


def redact_text(s: str) -> str:
    """Replace e-mail addresses and phone numbers in ``s``; keep everything else."""
    if len(s) < 5:
        return s
    if "@" in s or "%40" in s:
        s = _EMAIL.sub(EMAIL_PLACEHOLDER, s)
    if _has_seven_digits(s):
        s = _redact_phones(s)
    return s


def is_drop_key(key: str) -> bool:
    """Whether a value under ``key`` is personal data or a secret as a whole."""
    k = key.lower().replace("-", "_")
    return k in DROP_KEYS or k.endswith(_DROP_SUFFIXES)


_SAFE_SCALARS: Final[tuple[type, ...]] = (
    bool,
    int,
    float,
    decimal.Decimal,
    uuid.UUID,
    _dt.datetime,
    _dt.date,
    _dt.time,
    _dt.timedelta,
    type(None),
)


def redact_value(
    obj: Any,
    *,
    drop_keys: Collection[str] | Callable[[str], bool] | None = None,
    _depth: int = 0,
) -> Any:
    """Return a redacted copy of ``obj``.

    Strings go through :func:`redact_text`; mappings become dicts whose values
    under a dropped key are ``<redacted>`` (keys that are strings are redacted
    too); lists, tuples and sets become lists/tuples of redacted items; bytes
    are decoded (UTF-8, replacing errors) and redacted; numbers, booleans,
    None, UUIDs, dates and times are kept as they are; any other object is
    replaced by its redacted ``str()``. ``drop_keys`` overrides the default
    key rule (a collection of lower-case names, or a predicate).
    """
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, _SAFE_SCALARS):
        return obj
    if _depth > 64:
        return REDACTED
    if isinstance(obj, Mapping):
        if drop_keys is None:
            drop: Callable[[str], bool] = is_drop_key
        elif callable(drop_keys):
            drop = drop_keys
        else:
            names = frozenset(k.lower() for k in drop_keys)

            def drop(key: str) -> bool:
                return key.lower() in names

        out: dict[Any, Any] = {}
        for key, value in obj.items():
            if isinstance(key, str) and drop(key):
                out[redact_text(key)] = REDACTED
            else:
                out[redact_value(key, _depth=_depth + 1) if isinstance(key, str) else key] = (
                    redact_value(value, drop_keys=drop_keys, _depth=_depth + 1)
                )
        return out
    if isinstance(obj, tuple):
        return tuple(redact_value(v, drop_keys=drop_keys, _depth=_depth + 1) for v in obj)
    if isinstance(obj, list | set | frozenset):
        return [redact_value(v, drop_keys=drop_keys, _depth=_depth + 1) for v in obj]
    if isinstance(obj, bytes | bytearray | memoryview):
        return redact_text(bytes(obj).decode("utf-8", "replace"))
    try:
        text = str(obj)
    except Exception:
        return REDACTED
    return redact_text(text)


__all__ = [
    "DROP_KEYS",
    "EMAIL_PLACEHOLDER",
    "PHONE_PLACEHOLDER",
    "REDACTED",
    "is_drop_key",
    "redact_text",
    "redact_value",
]
