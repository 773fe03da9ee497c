"""Deny-by-default evaluation of a policy for one message.

`evaluate` turns a policy (`tidings.domain.policy_document`) plus a
`PolicyRequest` into a `Decision` with a stable code. Evaluation order,
first denial wins:

    destination valid -> purpose known -> channel/country enabled ->
    suppression -> opt-out -> consent -> expiry -> send window ->
    frequency caps

Final denials come first: a message that may never be sent is suppressed
rather than rescheduled until a quiet window or a cap clears. Rate and
spend limits are checked by the claim transaction (see `limits`) and turned
into decisions by `limit_decision`. See docs/policy.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final, Literal
from zoneinfo import ZoneInfo

from tidings.domain.decision_codes import DecisionCode
from tidings.domain.limits import SPEND_SCOPE, LimitCheck
from tidings.domain.policy_document import FrequencyCap, Policy
from tidings.domain.schedules import (
    next_window_start,
    open_everywhere,
    seconds_until,
    zone_or_none,
)

# A destination suppressed by a provider's complaint or hard-bounce receipt.
_SUPPRESSION_CODES: Final = {
    "complaint": DecisionCode.COMPLAINED,
    "hard_bounce": DecisionCode.BOUNCED,
}

# Said wherever POLICY_MISSING is answered: deny-by-default is only humane
# if the denial says how to stop being denied.
POLICY_MISSING_HELP: Final = (
    "no policy is published for this tenant, and nothing is allowed without one: "
    "publish one with `tidings policy publish FILE --tenant T` or `POST /v1/policies`; "
    "the shipped examples (default.json, eu.json, us.json in tidings/policies) "
    "are a starting point"
)

Action = Literal["send", "reschedule", "suppress", "expire"]


# --- the request and the decision -----------------------------------------


@dataclass(frozen=True)
class ConsentEvidence:
    channel: str
    purpose: str
    captured_at: datetime
    revoked_at: datetime | None = None
    # The consents row and the tenant's own reference to its proof, named
    # in the decision's inputs so an audit can find the evidence used.
    evidence_id: int | None = None
    evidence_ref: str | None = None

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
    # Where `timezone` came from ("intent", "contact"), for the decision's inputs.
    timezone_source: str | None = None
    consents: tuple[ConsentEvidence, ...]
    opted_out: bool
    suppressed: bool
    now: datetime
    suppression_reason: str | None = None
    expires_at: datetime | None = None
    recent_sends: Mapping[str, CapUsage] = field(default_factory=dict)
    # Zones the destination may be in (read from the number by
    # `recipients.parse_recipient`), used only when `timezone` is unknown;
    # the window must be open in all of them.
    fallback_timezones: tuple[str, ...] = ()
    destination_valid: bool = True


@dataclass(frozen=True)
class Decision:
    allowed: bool
    code: str
    policy_version: str | None  # None only for POLICY_MISSING
    retry_after_seconds: int | None = None
    not_before: datetime | None = None
    detail: str | None = None

    @property
    def final(self) -> bool:
        return not self.allowed and self.not_before is None

    @property
    def retryable(self) -> bool:
        return not self.allowed and self.not_before is not None


def policy_missing() -> Decision:
    """The decision for a tenant that has published no policy: a final no."""
    return Decision(False, DecisionCode.POLICY_MISSING, None, detail=POLICY_MISSING_HELP)


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
    return Decision(True, DecisionCode.ALLOWED, policy.version)


def _destination(policy: Policy, request: PolicyRequest) -> Decision | None:
    # An SMS needs a country to apply country rules to; email may lack one.
    unresolved = request.channel == "sms" and request.country is None
    if not request.destination_valid or unresolved:
        return _deny(policy, DecisionCode.DESTINATION_INVALID)
    return None


def _purpose(policy: Policy, request: PolicyRequest) -> Decision | None:
    known = request.purpose in policy.purposes
    return None if known else _deny(policy, DecisionCode.PURPOSE_UNKNOWN, request.purpose)


def _channel_country(policy: Policy, request: PolicyRequest) -> Decision | None:
    purpose = policy.purposes[request.purpose]
    if request.channel not in policy.countries or request.channel not in purpose.consent:
        return _deny(policy, DecisionCode.CHANNEL_DISABLED, request.channel)
    enabled = policy.countries[request.channel]
    if enabled is None or request.country in enabled:
        return None
    return _deny(policy, DecisionCode.COUNTRY_DISABLED, request.country)


def _suppression(policy: Policy, request: PolicyRequest) -> Decision | None:
    if not request.suppressed:
        return None
    code = _SUPPRESSION_CODES.get(request.suppression_reason or "", DecisionCode.SUPPRESSED)
    return _deny(policy, code, request.suppression_reason)


def _opt_out(policy: Policy, request: PolicyRequest) -> Decision | None:
    return _deny(policy, DecisionCode.OPTED_OUT) if request.opted_out else None


def _consent(policy: Policy, request: PolicyRequest) -> Decision | None:
    rule = policy.purposes[request.purpose].consent[request.channel]
    if not rule.requires_consent(request.country) or has_consent(request):
        return None
    return _deny(policy, DecisionCode.CONSENT_MISSING)


def has_consent(request: PolicyRequest) -> bool:
    """Only evidence for this exact channel and purpose, valid at `now`."""
    return consent_used(request) is not None


def consent_used(request: PolicyRequest) -> ConsentEvidence | None:
    """The evidence that satisfies consent for this message, if any."""
    return next(
        (
            e
            for e in request.consents
            if e.channel == request.channel
            and e.purpose == request.purpose
            and e.valid_at(request.now)
        ),
        None,
    )


def _expiry(policy: Policy, request: PolicyRequest) -> Decision | None:
    expired = request.expires_at is not None and request.now >= request.expires_at
    return _deny(policy, DecisionCode.EXPIRED) if expired else None


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
        return _deny(policy, DecisionCode.NO_SEND_WINDOW)
    return retryable_denial(policy, DecisionCode.QUIET_WINDOW, opens, request.now)


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
    return retryable_denial(policy, DecisionCode.RECIPIENT_LIMIT, not_before, request.now, cap_id)


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
        return Decision(True, DecisionCode.ALLOWED, policy.version)
    spend = check.key is not None and check.key.scope == SPEND_SCOPE
    code = DecisionCode.SPEND_LIMIT if spend else DecisionCode.RATE_LIMITED
    detail = check.key.key if check.key is not None else None
    if check.next_eligible_at is None:
        return _deny(policy, code, detail)  # the message alone exceeds the limit
    return retryable_denial(policy, code, check.next_eligible_at, now, detail)


def dispatch_action(decision: Decision, expires_at: datetime | None) -> Action:
    """What the worker does with a decision; a retry that could only fire
    at or after the deadline expires the intent now instead of parking it."""
    if decision.allowed:
        return "send"
    if decision.code == DecisionCode.EXPIRED:
        return "expire"
    if decision.not_before is None:
        return "suppress"
    late = expires_at is not None and decision.not_before >= expires_at
    return "expire" if late else "reschedule"
