"""The versioned policy document: what a tenant's policy says, and its parser.

A policy is data: `parse_policy` turns a JSON document into frozen
dataclasses, rejecting unknown keys so that a typo cannot silently relax a
rule. What a policy decides about one message is `tidings.domain.policy`.
See docs/policy.md. Values are read, and numbers bounded, by
`tidings.domain.policy_fields`, whose errors are re-exported from here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import time
from types import MappingProxyType
from typing import Any, Final, Literal, TypeVar

import phonenumbers

from tidings.domain import policy_bounds as bounds
from tidings.domain.limits import (
    SCOPES,
    RateLimitRule,
    Scope,
    SpendLimit,
)
from tidings.domain.policy_fields import PolicyError as PolicyError
from tidings.domain.policy_fields import PolicyLimitError as PolicyLimitError
from tidings.domain.policy_fields import fields as _fields
from tidings.domain.policy_fields import integer as _int
from tidings.domain.policy_fields import number as _number
from tidings.domain.policy_fields import obj as _obj
from tidings.domain.request_limits import UserTriggered, parse_user_triggered
from tidings.domain.schedules import (
    PollSchedule,
    RetryConfig,
    SendWindow,
)

CHANNELS: Final = ("sms", "email")
CONSENT_VALUES: Final = ("required", "not_required")

ConsentRequirement = Literal["required", "not_required"]


@dataclass(frozen=True)
class ConsentRule:
    default: ConsentRequirement
    overrides: Mapping[str, ConsentRequirement] = field(default_factory=dict)

    def requires_consent(self, country: str | None) -> bool:
        # An unknown country cannot match an override: the default applies.
        return self.overrides.get(country or "", self.default) == "required"


@dataclass(frozen=True)
class PurposeRule:
    """Per channel consent rules; a channel absent here is not permitted."""

    consent: Mapping[str, ConsentRule]
    send_window: bool = True
    # Whether a job of this purpose may ask for `first_available`: the
    # next channel when the first cannot be used (domain/channels.py).
    channel_fallback: bool = False


@dataclass(frozen=True)
class FrequencyCap:
    """At most `limit` sends per recipient per channel in a sliding window."""

    id: str
    channel: str
    limit: int
    per_seconds: int
    purposes: frozenset[str] | None = None

    def applies(self, channel: str, purpose: str) -> bool:
        return self.channel == channel and (self.purposes is None or purpose in self.purposes)


@dataclass(frozen=True)
class Retention:
    recipient_evidence_days: int
    attempt_evidence_days: int
    observation_days: int
    job_facts_days: int


@dataclass(frozen=True)
class Policy:
    name: str
    version: str
    countries: Mapping[str, frozenset[str] | None]  # channel -> enabled; None is "*"
    purposes: Mapping[str, PurposeRule]
    resend_budget: int
    poll_schedule: PollSchedule
    retention: Retention
    retry: RetryConfig
    send_windows: Mapping[str, SendWindow] = field(default_factory=dict)
    frequency_caps: tuple[FrequencyCap, ...] = ()
    rate_limits: tuple[RateLimitRule, ...] = ()
    country_spend_limits: Mapping[str, Mapping[str, SpendLimit]] = field(default_factory=dict)
    # Event classes a user's request triggers, bounded at create time.
    user_triggered: Mapping[str, UserTriggered] = field(default_factory=dict)
    description: str = ""


# --- parsing ----------------------------------------------------------------

T = TypeVar("T")
_TIME = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")
_REQUIRED: Final = frozenset(
    {
        "name",
        "version",
        "channels",
        "purposes",
        "resend_budget",
        "poll_schedule",
        "retention",
        "retry",
    }
)
_OPTIONAL: Final = frozenset(
    {
        "description",
        "send_windows",
        "frequency_caps",
        "rate_limits",
        "country_spend_limits",
        "user_triggered",
    }
)


def parse_policy(doc: Mapping[str, Any]) -> Policy:
    d = _fields(doc, "policy", _REQUIRED, _OPTIONAL)
    return Policy(
        name=_str(d["name"], "name"),
        version=_str(d["version"], "version"),
        description=_description(d.get("description", "")),
        countries=_channels(d["channels"]),
        purposes=_purposes(d["purposes"]),
        resend_budget=_int(d["resend_budget"], "resend_budget", 0, bounds.MAX_RESEND_BUDGET),
        poll_schedule=_build(PollSchedule, "poll_schedule", _poll(d["poll_schedule"])),
        retention=_build(Retention, "retention", _retention(d["retention"])),
        retry=_build(RetryConfig, "retry", _retry(d["retry"])),
        send_windows=_send_windows(d.get("send_windows", {})),
        frequency_caps=_caps(d.get("frequency_caps", [])),
        rate_limits=tuple(_rate_limit(r, f"rate_limits[{i}]") for i, r in _items(d, "rate_limits")),
        country_spend_limits=_spend_limits(d.get("country_spend_limits", {})),
        user_triggered=parse_user_triggered(d.get("user_triggered", {})),
    )


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise PolicyError(f"{where}: expected a list")
    return value


def _items(doc: Mapping[str, Any], key: str) -> list[tuple[int, Any]]:
    return list(enumerate(_list(doc.get(key, []), key)))


def _description(value: Any) -> str:
    if not isinstance(value, str):
        raise PolicyError("description: expected a string")
    return value


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise PolicyError(f"{where}: expected a non-empty string")
    return value


def _choice(value: Any, where: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise PolicyError(f"{where}: expected one of {', '.join(choices)}")
    return str(value)


def _country(value: Any, where: str) -> str:
    # phonenumbers' region list is ISO alpha-2 plus nothing made up, so it
    # catches the classic "UK" for GB as well as typos.
    if not isinstance(value, str) or value not in phonenumbers.SUPPORTED_REGIONS:
        raise PolicyError(f"{where}: {value!r} is not an ISO 3166 alpha-2 country code")
    return value


def _time(value: Any, where: str) -> time:
    match = _TIME.match(value) if isinstance(value, str) else None
    if match is None:
        raise PolicyError(f"{where}: expected a local time HH:MM")
    return time(int(match[1]), int(match[2]))


def _build(cls: Callable[..., T], where: str, kwargs: Mapping[str, Any]) -> T:
    try:
        return cls(**kwargs)
    except ValueError as exc:
        raise PolicyError(f"{where}: {exc}") from exc


def _frozen(items: Mapping[str, T]) -> Mapping[str, T]:
    return MappingProxyType(dict(items))


def _channel_map(value: Any, where: str) -> Mapping[str, Any]:
    return _fields(value, where, frozenset(), frozenset(CHANNELS))


def _channels(value: Any) -> Mapping[str, frozenset[str] | None]:
    doc = _channel_map(value, "channels")
    return _frozen({ch: _countries(v, f"channels.{ch}") for ch, v in doc.items()})


def _countries(value: Any, where: str) -> frozenset[str] | None:
    countries = _fields(value, where, frozenset({"countries"}))["countries"]
    if countries == "*":
        return None
    items = _list(countries, f"{where}.countries")
    return frozenset(_country(c, f"{where}.countries[{i}]") for i, c in enumerate(items))


def _purposes(value: Any) -> Mapping[str, PurposeRule]:
    return _frozen(
        {name: _purpose_rule(v, f"purposes.{name}") for name, v in _obj(value, "purposes").items()}
    )


def _purpose_rule(value: Any, where: str) -> PurposeRule:
    optional = frozenset({"send_window", "channel_fallback"})
    doc = _fields(value, where, frozenset({"consent"}), optional)
    window, fallback = doc.get("send_window", True), doc.get("channel_fallback", False)
    for name, flag in (("send_window", window), ("channel_fallback", fallback)):
        if not isinstance(flag, bool):
            raise PolicyError(f"{where}.{name}: expected true or false")
    consent = _channel_map(doc["consent"], f"{where}.consent")
    rules = {ch: _consent_rule(v, f"{where}.consent.{ch}") for ch, v in consent.items()}
    return PurposeRule(_frozen(rules), window, fallback)


def _consent_rule(value: Any, where: str) -> ConsentRule:
    doc = _fields(value, where, frozenset({"default"}), frozenset({"overrides"}))
    overrides = _obj(doc.get("overrides", {}), f"{where}.overrides")
    parsed = {
        _country(c, f"{where}.overrides"): _requirement(v, f"{where}.overrides.{c}")
        for c, v in overrides.items()
    }
    return ConsentRule(_requirement(doc["default"], f"{where}.default"), _frozen(parsed))


def _requirement(value: Any, where: str) -> ConsentRequirement:
    return "required" if _choice(value, where, CONSENT_VALUES) == "required" else "not_required"


def _send_windows(value: Any) -> Mapping[str, SendWindow]:
    doc = _channel_map(value, "send_windows")
    return _frozen({ch: _send_window_rule(v, f"send_windows.{ch}") for ch, v in doc.items()})


def _send_window_rule(value: Any, where: str) -> SendWindow:
    doc = _fields(value, where, frozenset({"start", "end"}))
    start, end = _time(doc["start"], f"{where}.start"), _time(doc["end"], f"{where}.end")
    return _build(SendWindow, where, {"start": start, "end": end})


_CAP_KEYS: Final = frozenset({"id", "channel", "limit", "per_seconds"})


def _caps(value: Any) -> tuple[FrequencyCap, ...]:
    caps = tuple(
        _cap(v, f"frequency_caps[{i}]") for i, v in enumerate(_list(value, "frequency_caps"))
    )
    ids = [c.id for c in caps]
    if len(ids) != len(set(ids)):
        raise PolicyError("frequency_caps: ids must be unique")
    return caps


def _cap(value: Any, where: str) -> FrequencyCap:
    doc = _fields(value, where, _CAP_KEYS, frozenset({"purposes"}))
    purposes = doc.get("purposes")
    return FrequencyCap(
        id=_str(doc["id"], f"{where}.id"),
        channel=_choice(doc["channel"], f"{where}.channel", CHANNELS),
        limit=_int(doc["limit"], f"{where}.limit", 1, bounds.MAX_COUNT),
        per_seconds=_int(doc["per_seconds"], f"{where}.per_seconds", 1, bounds.MAX_SECONDS),
        purposes=None if purposes is None else _names(purposes, f"{where}.purposes"),
    )


def _names(value: Any, where: str) -> frozenset[str]:
    return frozenset(_str(v, f"{where}[{i}]") for i, v in enumerate(_list(value, where)))


def _rate_limit(value: Any, where: str) -> RateLimitRule:
    doc = _fields(
        value, where, frozenset({"scope", "limit", "per_seconds"}), frozenset({"channel"})
    )
    channel = doc.get("channel")
    return RateLimitRule(
        scope=_scope(doc["scope"], f"{where}.scope"),
        limit=_int(doc["limit"], f"{where}.limit", 1, bounds.MAX_COUNT),
        per_seconds=_int(doc["per_seconds"], f"{where}.per_seconds", 1, bounds.MAX_SECONDS),
        channel=None if channel is None else _choice(channel, f"{where}.channel", CHANNELS),
    )


def _scope(value: Any, where: str) -> Scope:
    for scope in SCOPES:
        if value == scope:
            return scope
    raise PolicyError(f"{where}: expected one of {', '.join(SCOPES)}")


def _spend_limits(value: Any) -> Mapping[str, Mapping[str, SpendLimit]]:
    # Spend is counted in SMS segments, so only SMS can carry it.
    doc = _fields(value, "country_spend_limits", frozenset(), frozenset({"sms"}))
    return _frozen(
        {ch: _spend_by_country(v, f"country_spend_limits.{ch}") for ch, v in doc.items()}
    )


def _spend_by_country(value: Any, where: str) -> Mapping[str, SpendLimit]:
    items = _obj(value, where).items()
    return _frozen({_country(c, where): _spend(v, f"{where}.{c}") for c, v in items})


def _spend(value: Any, where: str) -> SpendLimit:
    doc = _fields(value, where, frozenset({"segments", "per_seconds"}))
    segments = _int(doc["segments"], f"{where}.segments", 1, bounds.MAX_COUNT)
    per_seconds = _int(doc["per_seconds"], f"{where}.per_seconds", 1, bounds.MAX_SECONDS)
    return SpendLimit(segments, per_seconds)


# Each number's upper limit (domain/policy_bounds.py); lower limits and the
# relations between fields (max >= base) are the dataclasses' own checks.
# Jitter's 0..1 is theirs too; this only keeps `float()` from overflowing.
_JITTER: Final = float(bounds.MAX_COUNT)
_POLL: Final = {
    "first_check_after_seconds": bounds.MAX_SECONDS,
    "factor": bounds.MAX_POLL_FACTOR,
    "max_interval_seconds": bounds.MAX_SECONDS,
    "jitter": _JITTER,
    "max_checks": bounds.MAX_CHECKS,
    "give_up_after_seconds": bounds.MAX_SECONDS,
}
_RETRY: Final = {
    "base_seconds": bounds.MAX_SECONDS,
    "max_seconds": bounds.MAX_SECONDS,
    "jitter": _JITTER,
}
_RETENTION: Final = (
    "recipient_evidence_days",
    "attempt_evidence_days",
    "observation_days",
    "job_facts_days",
)


def _poll(value: Any) -> dict[str, Any]:
    doc = _fields(value, "poll_schedule", frozenset(_POLL))
    parsed: dict[str, Any] = {
        k: _number(doc[k], f"poll_schedule.{k}", top) for k, top in _POLL.items()
    }
    parsed["max_checks"] = _int(doc["max_checks"], "poll_schedule.max_checks", 1, bounds.MAX_CHECKS)
    return parsed


def _retry(value: Any) -> dict[str, Any]:
    optional = frozenset({"max_failures", "max_pending_seconds"})
    doc = _fields(value, "retry", frozenset(_RETRY), optional)
    parsed: dict[str, Any] = {k: _number(doc[k], f"retry.{k}", top) for k, top in _RETRY.items()}
    if "max_failures" in doc:
        parsed["max_failures"] = _int(
            doc["max_failures"], "retry.max_failures", 1, bounds.MAX_FAILURES
        )
    if "max_pending_seconds" in doc:
        parsed["max_pending_seconds"] = _number(
            doc["max_pending_seconds"], "retry.max_pending_seconds", bounds.MAX_SECONDS
        )
    return parsed


def _retention(value: Any) -> dict[str, int]:
    doc = _fields(value, "retention", frozenset(_RETENTION))
    top = bounds.MAX_RETENTION_DAYS
    return {k: _int(doc[k], f"retention.{k}", 1, top) for k in _RETENTION}
