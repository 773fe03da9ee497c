"""The versioned policy document and its deny-by-default evaluator.

A policy is data: `parse_policy` turns a JSON document into frozen
dataclasses (rejecting unknown keys, so a typo cannot silently relax a
rule), and `evaluate` turns a policy plus a `PolicyRequest` into a
`Decision` with a stable code. Evaluation order, first denial wins:

    destination valid -> purpose known -> channel/country enabled ->
    suppression -> opt-out -> consent -> expiry -> send window ->
    frequency caps

Final denials come first: a message that may never be sent is suppressed
rather than rescheduled until a quiet window or a cap clears. Rate and
spend limits are checked by the claim transaction (see `limits`) and turned
into decisions by `limit_decision`. See docs/policy.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from types import MappingProxyType
from typing import Any, Final, Literal, TypeVar
from zoneinfo import ZoneInfo

import phonenumbers

from tidings.domain.limits import (
    SCOPES,
    SPEND_SCOPE,
    LimitCheck,
    RateLimitRule,
    Scope,
    SpendLimit,
)
from tidings.domain.recipients import zones_of_number
from tidings.domain.schedules import (
    PollSchedule,
    RetryConfig,
    SendWindow,
    next_window_start,
    open_everywhere,
    seconds_until,
    zone_or_none,
)

ALLOWED: Final = "ALLOWED"
DESTINATION_INVALID: Final = "DESTINATION_INVALID"
PURPOSE_UNKNOWN: Final = "PURPOSE_UNKNOWN"
CHANNEL_DISABLED: Final = "CHANNEL_DISABLED"
COUNTRY_DISABLED: Final = "COUNTRY_DISABLED"
SUPPRESSED: Final = "SUPPRESSED"
OPTED_OUT: Final = "OPTED_OUT"
CONSENT_MISSING: Final = "CONSENT_MISSING"
EXPIRED: Final = "EXPIRED"
QUIET_WINDOW: Final = "QUIET_WINDOW"
NO_SEND_WINDOW: Final = "NO_SEND_WINDOW"
RECIPIENT_LIMIT: Final = "RECIPIENT_LIMIT"
RATE_LIMITED: Final = "RATE_LIMITED"
SPEND_LIMIT: Final = "SPEND_LIMIT"

RETRYABLE_CODES: Final = frozenset({QUIET_WINDOW, RECIPIENT_LIMIT, RATE_LIMITED, SPEND_LIMIT})
CHANNELS: Final = ("sms", "email")
CONSENT_VALUES: Final = ("required", "not_required")

Action = Literal["send", "reschedule", "suppress", "expire"]
ConsentRequirement = Literal["required", "not_required"]


class PolicyError(ValueError):
    """The policy document is invalid; the message names the field."""


class DestinationError(ValueError):
    """A phone number is not a valid destination (never echoes the number)."""


# --- the document -----------------------------------------------------------


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
    description: str = ""


# --- the request and the decision -----------------------------------------


@dataclass(frozen=True)
class ConsentEvidence:
    channel: str
    purpose: str
    captured_at: datetime
    revoked_at: datetime | None = None

    def valid_at(self, now: datetime) -> bool:
        # Evidence from the future (clock skew, replays) proves nothing yet.
        revoked = self.revoked_at is not None and self.revoked_at <= now
        return self.captured_at <= now and not revoked


@dataclass(frozen=True)
class CapUsage:
    """Sends counted for one cap; oldest_at lets us say exactly when the
    window frees a slot (without it we wait a whole window)."""

    count: int
    oldest_at: datetime | None = None


@dataclass(frozen=True)
class CapWindow:
    """What the I/O layer must count: this recipient's sends on `channel`
    (only of `purposes`, when set) with sent_at > `since`."""

    cap_id: str
    channel: str
    purposes: frozenset[str] | None
    since: datetime


@dataclass(frozen=True, kw_only=True)
class PolicyRequest:
    channel: str
    purpose: str
    event_class: str
    country: str | None  # ISO alpha-2 of the destination; None when unknown
    timezone: str | None  # the recipient's IANA zone, when the contact has one
    consents: tuple[ConsentEvidence, ...]
    opted_out: bool
    suppressed: bool
    now: datetime
    suppression_reason: str | None = None
    expires_at: datetime | None = None
    recent_sends: Mapping[str, CapUsage] = field(default_factory=dict)
    # Zones the destination may be in (see timezones_for_phone), used only
    # when `timezone` is unknown; the window must be open in all of them.
    fallback_timezones: tuple[str, ...] = ()
    destination_valid: bool = True


@dataclass(frozen=True)
class Decision:
    allowed: bool
    code: str
    policy_version: str
    retry_after_seconds: int | None = None
    not_before: datetime | None = None
    detail: str | None = None

    @property
    def final(self) -> bool:
        return not self.allowed and self.not_before is None

    @property
    def retryable(self) -> bool:
        return not self.allowed and self.not_before is not None


def _deny(policy: Policy, code: str, detail: str | None = None) -> Decision:
    return Decision(False, code, policy.version, detail=detail)


def retryable_denial(
    policy: Policy, code: str, not_before: datetime, now: datetime, detail: str | None = None
) -> Decision:
    wait = seconds_until(not_before, now)
    return Decision(False, code, policy.version, wait, not_before, detail)


# --- evaluation -------------------------------------------------------------

Check = Callable[[Policy, PolicyRequest], Decision | None]


def evaluate(policy: Policy, request: PolicyRequest) -> Decision:
    """Deny by default: ALLOWED only when every check passes, in order."""
    if request.now.tzinfo is None:
        raise ValueError("request.now must be timezone-aware")
    for check in _CHECKS:
        decision = check(policy, request)
        if decision is not None:
            return decision
    return Decision(True, ALLOWED, policy.version)


def _destination(policy: Policy, request: PolicyRequest) -> Decision | None:
    # An SMS needs a country to apply country rules to; email may lack one.
    unresolved = request.channel == "sms" and request.country is None
    if not request.destination_valid or unresolved:
        return _deny(policy, DESTINATION_INVALID)
    return None


def _purpose(policy: Policy, request: PolicyRequest) -> Decision | None:
    known = request.purpose in policy.purposes
    return None if known else _deny(policy, PURPOSE_UNKNOWN, request.purpose)


def _channel_country(policy: Policy, request: PolicyRequest) -> Decision | None:
    purpose = policy.purposes[request.purpose]
    if request.channel not in policy.countries or request.channel not in purpose.consent:
        return _deny(policy, CHANNEL_DISABLED, request.channel)
    enabled = policy.countries[request.channel]
    if enabled is None or request.country in enabled:
        return None
    return _deny(policy, COUNTRY_DISABLED, request.country)


def _suppression(policy: Policy, request: PolicyRequest) -> Decision | None:
    return _deny(policy, SUPPRESSED, request.suppression_reason) if request.suppressed else None


def _opt_out(policy: Policy, request: PolicyRequest) -> Decision | None:
    return _deny(policy, OPTED_OUT) if request.opted_out else None


def _consent(policy: Policy, request: PolicyRequest) -> Decision | None:
    rule = policy.purposes[request.purpose].consent[request.channel]
    if not rule.requires_consent(request.country) or has_consent(request):
        return None
    return _deny(policy, CONSENT_MISSING)


def has_consent(request: PolicyRequest) -> bool:
    """Only evidence for this exact channel and purpose, valid at `now`."""
    return any(
        e.channel == request.channel and e.purpose == request.purpose and e.valid_at(request.now)
        for e in request.consents
    )


def _expiry(policy: Policy, request: PolicyRequest) -> Decision | None:
    expired = request.expires_at is not None and request.now >= request.expires_at
    return _deny(policy, EXPIRED) if expired else None


def _send_window(policy: Policy, request: PolicyRequest) -> Decision | None:
    window = policy.send_windows.get(request.channel)
    if window is None or not policy.purposes[request.purpose].send_window:
        return None
    zones = recipient_zones(request)
    if zones and open_everywhere(window, zones, request.now):
        return None
    opens = next_window_start(window, zones, request.now) if zones else None
    if opens is None:
        # We cannot know the recipient's local time, so cannot honour it.
        return _deny(policy, NO_SEND_WINDOW)
    return retryable_denial(policy, QUIET_WINDOW, opens, request.now)


def recipient_zones(request: PolicyRequest) -> tuple[ZoneInfo, ...]:
    own = zone_or_none(request.timezone)
    if own is not None:
        return (own,)
    zones = (zone_or_none(name) for name in request.fallback_timezones)
    return tuple(z for z in zones if z is not None)


def _frequency_caps(policy: Policy, request: PolicyRequest) -> Decision | None:
    caps = [c for c in policy.frequency_caps if c.applies(request.channel, request.purpose)]
    waits = [(_cap_clears_at(c, request), c.id) for c in caps if _cap_full(c, request)]
    if not waits:
        return None
    not_before, cap_id = max(waits)
    return retryable_denial(policy, RECIPIENT_LIMIT, not_before, request.now, cap_id)


def _cap_usage(cap: FrequencyCap, request: PolicyRequest) -> CapUsage:
    # A missing count is a caller bug; allowing would silently lift the cap.
    if cap.id not in request.recent_sends:
        raise ValueError(f"recent_sends lacks a count for frequency cap {cap.id!r}")
    return request.recent_sends[cap.id]


def _cap_full(cap: FrequencyCap, request: PolicyRequest) -> bool:
    return _cap_usage(cap, request).count >= cap.limit


def _cap_clears_at(cap: FrequencyCap, request: PolicyRequest) -> datetime:
    # The oldest counted send leaving the window frees one slot; if more
    # are needed, the re-evaluation then denies again with a later time.
    oldest = _cap_usage(cap, request).oldest_at
    window = timedelta(seconds=cap.per_seconds)
    clears = oldest + window if oldest is not None else None
    return clears if clears is not None and clears > request.now else request.now + window


_CHECKS: Final[tuple[Check, ...]] = (
    _destination,
    _purpose,
    _channel_country,
    _suppression,
    _opt_out,
    _consent,
    _expiry,
    _send_window,
    _frequency_caps,
)


def cap_windows(policy: Policy, channel: str, purpose: str, now: datetime) -> tuple[CapWindow, ...]:
    """The counts `evaluate` needs in `recent_sends`, keyed by cap id."""
    return tuple(
        CapWindow(c.id, c.channel, c.purposes, now - timedelta(seconds=c.per_seconds))
        for c in policy.frequency_caps
        if c.applies(channel, purpose)
    )


def limit_decision(policy: Policy, check: LimitCheck, now: datetime) -> Decision:
    """Turn the claim transaction's limit check into a recorded decision."""
    if check.allowed:
        return Decision(True, ALLOWED, policy.version)
    spend = check.key is not None and check.key.scope == SPEND_SCOPE
    code = SPEND_LIMIT if spend else RATE_LIMITED
    detail = check.key.key if check.key is not None else None
    if check.next_eligible_at is None:
        return _deny(policy, code, detail)  # the message alone exceeds the limit
    return retryable_denial(policy, code, check.next_eligible_at, now, detail)


def dispatch_action(decision: Decision, expires_at: datetime | None) -> Action:
    """What the worker does with a decision; a retry that could only fire
    at or after the deadline expires the intent now instead of parking it."""
    if decision.allowed:
        return "send"
    if decision.code == EXPIRED:
        return "expire"
    if decision.not_before is None:
        return "suppress"
    late = expires_at is not None and decision.not_before >= expires_at
    return "expire" if late else "reschedule"


# --- destinations -----------------------------------------------------------


def validate_phone(raw: str, default_region: str | None = None) -> str:
    """E.164 for a valid number, else DestinationError (number not echoed:
    error messages end up in logs, which must not hold phone numbers)."""
    try:
        number = phonenumbers.parse(raw, default_region)
    except phonenumbers.NumberParseException as exc:
        raise DestinationError("phone number could not be parsed") from exc
    if not phonenumbers.is_valid_number(number):
        raise DestinationError("phone number is not valid")
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


def _parsed(phone_e164: str) -> phonenumbers.PhoneNumber | None:
    try:
        number = phonenumbers.parse(phone_e164, None)
    except phonenumbers.NumberParseException:
        return None
    return number if phonenumbers.is_valid_number(number) else None


def destination_country(phone_e164: str) -> str | None:
    """ISO alpha-2 of a valid number; None for invalid or non-geographic."""
    number = _parsed(phone_e164)
    region = phonenumbers.region_code_for_number(number) if number is not None else None
    return region if region in phonenumbers.SUPPORTED_REGIONS else None


def timezones_for_phone(phone_e164: str) -> tuple[str, ...]:
    number = _parsed(phone_e164)
    if number is None:
        return ()
    return zones_of_number(number)


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
    {"description", "send_windows", "frequency_caps", "rate_limits", "country_spend_limits"}
)


def parse_policy(doc: Mapping[str, Any]) -> Policy:
    d = _fields(doc, "policy", _REQUIRED, _OPTIONAL)
    return Policy(
        name=_str(d["name"], "name"),
        version=_str(d["version"], "version"),
        description=_description(d.get("description", "")),
        countries=_channels(d["channels"]),
        purposes=_purposes(d["purposes"]),
        resend_budget=_int(d["resend_budget"], "resend_budget", 0),
        poll_schedule=_build(
            PollSchedule, "poll_schedule", _numbers(d["poll_schedule"], "poll_schedule", _POLL)
        ),
        retention=_build(Retention, "retention", _retention(d["retention"])),
        retry=_build(RetryConfig, "retry", _numbers(d["retry"], "retry", _RETRY)),
        send_windows=_send_windows(d.get("send_windows", {})),
        frequency_caps=_caps(d.get("frequency_caps", [])),
        rate_limits=tuple(_rate_limit(r, f"rate_limits[{i}]") for i, r in _items(d, "rate_limits")),
        country_spend_limits=_spend_limits(d.get("country_spend_limits", {})),
    )


def _fields(
    value: Any, where: str, required: frozenset[str], optional: frozenset[str] = frozenset()
) -> Mapping[str, Any]:
    doc = _obj(value, where)
    unknown = sorted(set(doc) - required - optional)
    missing = sorted(required - set(doc))
    if unknown:
        raise PolicyError(f"{where}: unknown key(s) {', '.join(unknown)}")
    if missing:
        raise PolicyError(f"{where}: missing key(s) {', '.join(missing)}")
    return doc


def _obj(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise PolicyError(f"{where}: expected an object")
    return value


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


def _int(value: Any, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise PolicyError(f"{where}: expected an integer >= {minimum}")
    return value


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PolicyError(f"{where}: expected a number")
    return float(value)


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
    doc = _fields(value, where, frozenset({"consent"}), frozenset({"send_window"}))
    window = doc.get("send_window", True)
    if not isinstance(window, bool):
        raise PolicyError(f"{where}.send_window: expected true or false")
    consent = _channel_map(doc["consent"], f"{where}.consent")
    rules = {ch: _consent_rule(v, f"{where}.consent.{ch}") for ch, v in consent.items()}
    return PurposeRule(_frozen(rules), window)


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
        limit=_int(doc["limit"], f"{where}.limit", 1),
        per_seconds=_int(doc["per_seconds"], f"{where}.per_seconds", 1),
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
        limit=_int(doc["limit"], f"{where}.limit", 1),
        per_seconds=_int(doc["per_seconds"], f"{where}.per_seconds", 1),
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
    segments = _int(doc["segments"], f"{where}.segments", 1)
    return SpendLimit(segments, _int(doc["per_seconds"], f"{where}.per_seconds", 1))


_POLL: Final = (
    "first_check_after_seconds",
    "factor",
    "max_interval_seconds",
    "jitter",
    "max_checks",
    "give_up_after_seconds",
)
_RETRY: Final = ("base_seconds", "max_seconds", "jitter")
_RETENTION: Final = (
    "recipient_evidence_days",
    "attempt_evidence_days",
    "observation_days",
    "job_facts_days",
)


def _numbers(value: Any, where: str, keys: tuple[str, ...]) -> dict[str, Any]:
    doc = _fields(value, where, frozenset(keys))
    parsed: dict[str, Any] = {k: _number(doc[k], f"{where}.{k}") for k in keys}
    if "max_checks" in parsed:
        parsed["max_checks"] = _int(doc["max_checks"], f"{where}.max_checks", 1)
    return parsed


def _retention(value: Any) -> dict[str, int]:
    doc = _fields(value, "retention", frozenset(_RETENTION))
    return {k: _int(doc[k], f"retention.{k}", 1) for k in _RETENTION}
