"""Abuse bounds at the request edge: how many creates a user-triggered event
class may take per destination and per number prefix (issue #41).

A password reset is triggered by whoever types a number into a form, so a
script can ask for thousands of SMS to premium-rate numbers in a few
ranges (SMS pumping). The policy's `user_triggered` marks such classes and
bounds them; a create over a bound is refused before anything is stored
(`RequestLimited`, HTTP 429 `REQUEST_LIMIT`), so nothing is ever sent.

Counting reuses the rate counters of domain/limits.py: fixed windows, one
row per key and window, a conditional upsert. The destination is counted
by its keyed hash, never the number; the prefix is the number's E.164
calling code and the next PREFIX_DIGITS digits (+1 and the area code in
North America, +44 7xx in the UK), which names a range an operator can
block at the provider, not a person.

Every request of a bounded SMS class is also counted per country and
prefix in hourly windows (VOLUME_SCOPE), refused ones included: the
anomaly alert compares that volume with its own baseline
(domain/request_anomaly.py). Pure: store/rate_counters.py keeps the rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final, Literal

import phonenumbers

from tidings.domain import policy_bounds as bounds
from tidings.domain.limits import LimitKey
from tidings.domain.policy_fields import PolicyError, fields, integer, obj

RequestScope = Literal["destination", "prefix"]
REQUEST_SCOPES: Final[tuple[RequestScope, ...]] = ("destination", "prefix")
# Digits after the calling code that name a prefix: a national destination
# code or an operator's block in most plans, so one bound covers the range
# a pumping script cycles through without covering a whole country.
PREFIX_DIGITS: Final = 3
VOLUME_SCOPE: Final = "request_volume"
VOLUME_SECONDS: Final = 3600
_SCOPE_PREFIX: Final = "request_"


@dataclass(frozen=True)
class RequestBound:
    """At most `limit` creates per `per_seconds` per value of the scope."""

    limit: int
    per_seconds: int


@dataclass(frozen=True)
class UserTriggered:
    """The bounds of one user-triggered event class; None is unbounded."""

    destination: RequestBound | None = None
    prefix: RequestBound | None = None

    def bound(self, scope: RequestScope) -> RequestBound | None:
        return self.destination if scope == "destination" else self.prefix


def parse_user_triggered(value: Any) -> Mapping[str, UserTriggered]:
    """`{event_class: {"destination"?: bound, "prefix"?: bound}}`."""
    doc = obj(value, "user_triggered")
    return MappingProxyType({name: _rule(v, f"user_triggered.{name}") for name, v in doc.items()})


def _rule(value: Any, where: str) -> UserTriggered:
    doc = fields(value, where, frozenset(), frozenset(REQUEST_SCOPES))
    if not doc:
        raise PolicyError(f"{where}: give a destination or prefix bound")
    parsed = {s: _bound(doc[s], f"{where}.{s}") for s in REQUEST_SCOPES if s in doc}
    return UserTriggered(**parsed)


def _bound(value: Any, where: str) -> RequestBound:
    doc = fields(value, where, frozenset({"limit", "per_seconds"}))
    return RequestBound(
        integer(doc["limit"], f"{where}.limit", 1, bounds.MAX_COUNT),
        integer(doc["per_seconds"], f"{where}.per_seconds", 1, bounds.MAX_SECONDS),
    )


def phone_prefix(e164: str) -> str | None:
    """`+` calling code and the next PREFIX_DIGITS digits; None for a string
    that is not E.164. Calling codes are prefix-free, so the first of 1 to
    3 digits that is one is the one."""
    if not e164.startswith("+") or not e164[1:].isdigit():
        return None
    digits = e164[1:]
    for size in (1, 2, 3):
        if int(digits[:size]) in phonenumbers.COUNTRY_CODE_TO_REGION_CODE:
            whole = len(digits) >= size + PREFIX_DIGITS
            return "+" + digits[: size + PREFIX_DIGITS] if whole else None
    return None


def request_keys(
    rule: UserTriggered, event_class: str, destination_hash: str, prefix: str | None
) -> list[LimitKey]:
    """The counters one create of the class spends: one per bound that has
    a value to count (an e-mail has no prefix)."""
    values: dict[RequestScope, str | None] = {"destination": destination_hash, "prefix": prefix}
    keys = []
    for scope in REQUEST_SCOPES:
        bound, value = rule.bound(scope), values[scope]
        if bound is None or value is None:
            continue
        key = f"{event_class}:{bound.per_seconds}s:{value}"
        keys.append(LimitKey(_SCOPE_PREFIX + scope, key, bound.limit, bound.per_seconds, 1))
    return keys


def scope_of(key: LimitKey) -> RequestScope:
    """The policy's name of the bound a request key counts."""
    return "destination" if key.scope == _SCOPE_PREFIX + "destination" else "prefix"


def volume_key(event_class: str, country: str, prefix: str) -> LimitKey:
    """The hourly count of one class's requests to one country and prefix;
    never full (its limit is the largest count a policy may write)."""
    key = f"{event_class}|{country}|{prefix}"
    return LimitKey(VOLUME_SCOPE, key, bounds.MAX_COUNT, VOLUME_SECONDS, 1)


def volume_parts(key: str) -> tuple[str, str, str] | None:
    """(event class, country, prefix) of a volume key; None if malformed."""
    parts = key.rsplit("|", 2)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else None


def retry_after(key: LimitKey, now: datetime) -> int:
    """Whole seconds until the key's window ends (at least 1)."""
    end = key.window_start(now).timestamp() + key.per_seconds
    return max(1, int(-(-(end - now.timestamp()) // 1)))
