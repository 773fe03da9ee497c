"""Shadow replay: recorded decisions checked against the pure domain.

Before dispatch is enabled for a region or purpose, operators replay
fixtures: each case is a policy, the facts of one decision, and optionally
the lifecycle events that followed it. The replay runs `evaluate`, then
pushes the events through the transition table the way the ledger applies
them, and compares the outcome with what the fixture expects. No database,
no provider, no clock: everything comes from the fixture, so a run is
reproducible and safe anywhere. See docs/replay.md.

How events are applied mirrors the dispatch code without importing it (it
needs PostgreSQL):

- `claim` is the claim transaction (`dispatch.claim`/`dispatch.gate`): only
  a pending or resend_due intent is claimable, and the gate turns the
  decision into claim (one provider send), defer, policy_denied or
  deadline_passed. A replayed queue message finds nothing to claim.
- provider answers and lookups (`dispatch.record`, `dispatch.reconcile`)
  settle an attempt only from the states the ledger's UPDATE accepts, and
  move the intent when the table allows.
- receipts (`dispatch.observe`) must advance their attempt
  (`attempt_advances`) or change nothing at all; an older attempt's bad
  news never moves the intent, while any attempt's delivery does.
- everything else (cancel, deadline_passed, ...) moves the intent only.

An event the table refuses is recorded as `ignored` (or `attempt_only`
when the attempt record still moved), exactly as the ledger refuses it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

from tidings.domain import policy as rules
from tidings.domain.policy import (
    Action,
    CapUsage,
    ConsentEvidence,
    Decision,
    Policy,
    PolicyError,
    PolicyRequest,
    cap_windows,
    dispatch_action,
    evaluate,
    parse_policy,
)
from tidings.domain.states import AttemptState, IntentState
from tidings.domain.transitions import (
    Event,
    allowed,
    attempt_advances,
    next_state,
    on_undelivered,
)
from tidings.policies import load_builtin

T = TypeVar("T")
Effect = Literal["applied", "attempt_only", "ignored"]
Value = bool | int | str | datetime | tuple[str, ...] | None

EXIT_OK: Final = 0
EXIT_DIFFERENCES: Final = 1
EXIT_INVALID: Final = 2

# A receipt that says "undelivered" without saying whether a resend is due:
# the replay resolves it with `on_undelivered`, as dispatch.observe does.
UNDELIVERED: Final = "undelivered"
EVENT_NAMES: Final = (*(e.value for e in Event), UNDELIVERED)
ACTIONS: Final = ("send", "reschedule", "suppress", "expire")
EFFECTS: Final = ("applied", "attempt_only", "ignored")
CODES: Final = frozenset(
    {
        rules.ALLOWED,
        rules.DESTINATION_INVALID,
        rules.PURPOSE_UNKNOWN,
        rules.CHANNEL_DISABLED,
        rules.COUNTRY_DISABLED,
        rules.SUPPRESSED,
        rules.OPTED_OUT,
        rules.CONSENT_MISSING,
        rules.EXPIRED,
        rules.QUIET_WINDOW,
        rules.NO_SEND_WINDOW,
        rules.RECIPIENT_LIMIT,
        rules.RATE_LIMITED,
        rules.SPEND_LIMIT,
    }
)


class FixtureError(ValueError):
    """A fixture file is unreadable or invalid; the message names file and field."""


class _Invalid(ValueError):
    """A field is invalid; load_file prefixes the file name."""


# --- the fixture model ------------------------------------------------------


@dataclass(frozen=True)
class Step:
    event: str  # an Event value or UNDELIVERED
    attempt: int | None = None  # which attempt a provider answer/receipt is for; None: latest


@dataclass(frozen=True)
class Case:
    name: str
    why: str
    file: str
    policy: Policy
    request: PolicyRequest
    steps: tuple[Step, ...]
    expect: Mapping[str, Value]  # flat field name -> expected value, only what the case pins


# --- loading ----------------------------------------------------------------


def load_fixtures(path: Path) -> list[Case]:
    """Every case in `path`: one JSON file, or each *.json in a directory."""
    files = _fixture_files(path)
    cases = [case for f in files for case in load_file(f)]
    _unique_names(cases)
    return cases


def _fixture_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.glob("*.json") if p.is_file())
        if not files:
            raise FixtureError(f"{path}: no fixture files (*.json) in this directory")
        return files
    if not path.is_file():
        raise FixtureError(f"{path}: no such file or directory")
    return [path]


def _unique_names(cases: Sequence[Case]) -> None:
    # Names identify cases in reports and diffs; a repeat would hide one.
    seen: dict[str, str] = {}
    for case in cases:
        if case.name in seen:
            raise FixtureError(
                f"{case.file}: case name {case.name!r} is also used in {seen[case.name]}"
            )
        seen[case.name] = case.file


def load_file(path: Path) -> list[Case]:
    try:
        doc = _read_json(path)
        top = _fields(doc, "file", {"cases"}, {"description"})
        items = _list(top["cases"], "cases")
        if not items:
            raise _Invalid("cases: expected at least one case")
        return [_case(item, f"cases[{i}]", str(path)) for i, item in enumerate(items)]
    except _Invalid as exc:
        raise FixtureError(f"{path}: {exc}") from None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"), object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise _Invalid(f"not valid JSON: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _Invalid(f"cannot be read: {exc}") from None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json keeps the last of repeated keys; in a fixture that silently
    # changes what is being checked.
    keys = [k for k, _ in pairs]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise _Invalid(f"duplicate key(s) {', '.join(repeated)}")
    return dict(pairs)


_CASE_REQUIRED: Final = frozenset({"name", "why", "policy", "request", "expect"})


def _case(value: Any, where: str, file: str) -> Case:
    doc = _fields(value, where, _CASE_REQUIRED, {"events"})
    policy = _policy(doc["policy"], f"{where}.policy")
    request = _request(doc["request"], f"{where}.request", policy)
    steps = _steps(doc.get("events", []), f"{where}.events")
    return Case(
        name=_str(doc["name"], f"{where}.name"),
        why=_str(doc["why"], f"{where}.why"),
        file=file,
        policy=policy,
        request=request,
        steps=steps,
        expect=_expect(doc["expect"], f"{where}.expect", len(steps)),
    )


def _policy(value: Any, where: str) -> Policy:
    try:
        return _builtin(value) if isinstance(value, str) else parse_policy(_obj(value, where))
    except PolicyError as exc:
        raise _Invalid(f"{where}: {exc}") from None


@cache
def _builtin(name: str) -> Policy:
    return load_builtin(name)


_REQUEST_REQUIRED: Final = frozenset({"channel", "purpose", "event_class", "country", "now"})
_REQUEST_OPTIONAL: Final = frozenset(
    {
        "timezone",
        "fallback_timezones",
        "consents",
        "opted_out",
        "suppressed",
        "suppression_reason",
        "expires_at",
        "recent_sends",
        "destination_valid",
    }
)


def _request(value: Any, where: str, policy: Policy) -> PolicyRequest:
    doc = _fields(value, where, _REQUEST_REQUIRED, _REQUEST_OPTIONAL)
    zones = _list(doc.get("fallback_timezones", []), f"{where}.fallback_timezones")
    request = PolicyRequest(
        channel=_str(doc["channel"], f"{where}.channel"),
        purpose=_str(doc["purpose"], f"{where}.purpose"),
        event_class=_str(doc["event_class"], f"{where}.event_class"),
        country=_optional(doc["country"], f"{where}.country", _str),
        timezone=_optional(doc.get("timezone"), f"{where}.timezone", _str),
        fallback_timezones=tuple(
            _str(z, f"{where}.fallback_timezones[{i}]") for i, z in enumerate(zones)
        ),
        consents=_consents(doc.get("consents", []), f"{where}.consents"),
        opted_out=_bool(doc.get("opted_out", False), f"{where}.opted_out"),
        suppressed=_bool(doc.get("suppressed", False), f"{where}.suppressed"),
        suppression_reason=_optional(
            doc.get("suppression_reason"), f"{where}.suppression_reason", _str
        ),
        now=_datetime(doc["now"], f"{where}.now"),
        expires_at=_optional(doc.get("expires_at"), f"{where}.expires_at", _datetime),
        recent_sends=_recent_sends(doc.get("recent_sends", {}), f"{where}.recent_sends"),
        destination_valid=_bool(doc.get("destination_valid", True), f"{where}.destination_valid"),
    )
    _counts_present(policy, request, f"{where}.recent_sends")
    return request


def _counts_present(policy: Policy, request: PolicyRequest, where: str) -> None:
    # evaluate() refuses to guess a missing count (guessing zero would lift
    # the cap); say so here, at the field, rather than as a crash mid-run.
    if request.purpose not in policy.purposes:
        return  # PURPOSE_UNKNOWN is decided before any cap is looked at
    for window in cap_windows(policy, request.channel, request.purpose, request.now):
        if window.cap_id not in request.recent_sends:
            raise _Invalid(f"{where}: missing a count for frequency cap {window.cap_id!r}")


_CONSENT_REQUIRED: Final = frozenset({"channel", "purpose", "captured_at"})
# source and evidence_ref are what the contacts API records; kept readable
# in fixtures exported from it, and ignored by the decision.
_CONSENT_OPTIONAL: Final = frozenset({"revoked_at", "source", "evidence_ref"})


def _consents(value: Any, where: str) -> tuple[ConsentEvidence, ...]:
    return tuple(_consent(v, f"{where}[{i}]") for i, v in enumerate(_list(value, where)))


def _consent(value: Any, where: str) -> ConsentEvidence:
    doc = _fields(value, where, _CONSENT_REQUIRED, _CONSENT_OPTIONAL)
    return ConsentEvidence(
        channel=_str(doc["channel"], f"{where}.channel"),
        purpose=_str(doc["purpose"], f"{where}.purpose"),
        captured_at=_datetime(doc["captured_at"], f"{where}.captured_at"),
        revoked_at=_optional(doc.get("revoked_at"), f"{where}.revoked_at", _datetime),
    )


def _recent_sends(value: Any, where: str) -> Mapping[str, CapUsage]:
    return {cap: _usage(v, f"{where}.{cap}") for cap, v in _obj(value, where).items()}


def _usage(value: Any, where: str) -> CapUsage:
    doc = _fields(value, where, {"count"}, {"oldest_at"})
    oldest = _optional(doc.get("oldest_at"), f"{where}.oldest_at", _datetime)
    return CapUsage(_int(doc["count"], f"{where}.count"), oldest)


def _steps(value: Any, where: str) -> tuple[Step, ...]:
    return tuple(_step(v, f"{where}[{i}]") for i, v in enumerate(_list(value, where)))


def _step(value: Any, where: str) -> Step:
    if isinstance(value, str):
        return Step(_choice(value, where, EVENT_NAMES))
    doc = _fields(value, where, {"event"}, {"attempt"})
    event = _choice(doc["event"], f"{where}.event", EVENT_NAMES)
    attempt = _optional(doc.get("attempt"), f"{where}.attempt", _positive)
    if attempt is not None and event not in _ATTEMPT_EVENTS:
        raise _Invalid(f"{where}.attempt: {event!r} is not about an attempt")
    return Step(event, attempt)


_EXPECT_OPTIONAL: Final = frozenset({"action", "final_state", "sends", "effects", "attempts"})


def _expect(value: Any, where: str, n_steps: int) -> dict[str, Value]:
    doc = _fields(value, where, {"decision"}, _EXPECT_OPTIONAL)
    expect = _expect_decision(doc["decision"], f"{where}.decision")
    parsers: dict[str, Callable[[Any, str], Value]] = {
        "action": lambda v, w: _choice(v, w, ACTIONS),
        "final_state": lambda v, w: _choice(v, w, tuple(IntentState)),
        "sends": _int,
        "effects": lambda v, w: _names(v, w, EFFECTS),
        "attempts": lambda v, w: _names(v, w, tuple(AttemptState)),
    }
    for key, parse in parsers.items():
        if key in doc:
            expect[key] = parse(doc[key], f"{where}.{key}")
    effects = expect.get("effects")
    if isinstance(effects, tuple) and len(effects) != n_steps:
        raise _Invalid(f"{where}.effects: {len(effects)} effects for {n_steps} events")
    return expect


def _expect_decision(value: Any, where: str) -> dict[str, Value]:
    doc = _fields(value, where, {"allowed", "code"}, {"not_before", "detail"})
    expect: dict[str, Value] = {
        "decision.allowed": _bool(doc["allowed"], f"{where}.allowed"),
        "decision.code": _choice(doc["code"], f"{where}.code", tuple(sorted(CODES))),
    }
    if "not_before" in doc:
        not_before = doc["not_before"]
        expect["decision.not_before"] = _optional(not_before, f"{where}.not_before", _datetime)
    if "detail" in doc:
        expect["decision.detail"] = _optional(doc["detail"], f"{where}.detail", _str)
    return expect


# --- field helpers ----------------------------------------------------------


def _fields(value: Any, where: str, required: Set[str], optional: Set[str]) -> Mapping[str, Any]:
    doc = _obj(value, where)
    unknown = sorted(set(doc) - required - optional)
    missing = sorted(required - set(doc))
    if unknown:
        raise _Invalid(f"{where}: unknown key(s) {', '.join(unknown)}")
    if missing:
        raise _Invalid(f"{where}: missing key(s) {', '.join(missing)}")
    return doc


def _obj(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _Invalid(f"{where}: expected an object")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _Invalid(f"{where}: expected a list")
    return value


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Invalid(f"{where}: expected a non-empty string")
    return value


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise _Invalid(f"{where}: expected true or false")
    return value


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Invalid(f"{where}: expected an integer >= 0")
    return value


def _positive(value: Any, where: str) -> int:
    if _int(value, where) < 1:
        raise _Invalid(f"{where}: expected an integer >= 1")
    return int(value)


def _choice(value: Any, where: str, choices: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise _Invalid(f"{where}: {value!r} is not one of {', '.join(choices)}")
    return value


def _names(value: Any, where: str, choices: Sequence[str]) -> tuple[str, ...]:
    items = _list(value, where)
    return tuple(_choice(v, f"{where}[{i}]", choices) for i, v in enumerate(items))


def _datetime(value: Any, where: str) -> datetime:
    # Decisions depend on instants; a naive time would be read in whatever
    # zone the replaying machine is in, so it is refused.
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.utcoffset() is None:
        raise _Invalid(f"{where}: expected an ISO 8601 date-time with an offset, got {value!r}")
    return parsed


def _optional(value: Any, where: str, parse: Callable[[Any, str], T]) -> T | None:
    return None if value is None else parse(value, where)


# --- replaying events -------------------------------------------------------

# What each provider answer or lookup result does to its attempt, and the
# attempt states the ledger's UPDATE accepts it from (record._settle and
# reconcile._not_received). The intent moves by the table regardless,
# because the worker records its own call's outcome on the intent.
_ANSWERS: Final[Mapping[Event, tuple[AttemptState, frozenset[AttemptState]]]] = {
    Event.PROVIDER_ACCEPTED: (
        AttemptState.ACCEPTED,
        frozenset({AttemptState.SENDING, AttemptState.UNKNOWN}),
    ),
    Event.PROVIDER_DEFERRED: (
        AttemptState.FAILED,
        frozenset({AttemptState.SENDING, AttemptState.UNKNOWN}),
    ),
    Event.PROVIDER_REJECTED: (
        AttemptState.FAILED,
        frozenset({AttemptState.SENDING, AttemptState.UNKNOWN}),
    ),
    Event.PREPARE_FAILED: (
        AttemptState.FAILED,
        frozenset({AttemptState.SENDING, AttemptState.UNKNOWN}),
    ),
    Event.OUTCOME_UNKNOWN: (AttemptState.UNKNOWN, frozenset({AttemptState.SENDING})),
    Event.NOT_RECEIVED: (AttemptState.FAILED, frozenset({AttemptState.UNKNOWN})),
}

# Delivery receipts (dispatch.observe): what each says about its attempt.
_RECEIPTS: Final[Mapping[str, AttemptState]] = {
    Event.DELIVERED.value: AttemptState.DELIVERED,
    UNDELIVERED: AttemptState.UNDELIVERED,
    Event.UNDELIVERED_RETRYABLE.value: AttemptState.UNDELIVERED,
    Event.RESEND_BUDGET_EXHAUSTED.value: AttemptState.UNDELIVERED,
    Event.DELIVERY_FAILED.value: AttemptState.FAILED,
}

_ATTEMPT_EVENTS: Final = frozenset({e.value for e in _ANSWERS} | set(_RECEIPTS))

# The claim gate's verdict as the one transition the claim transaction applies.
_CLAIM_AS: Final[Mapping[str, Event]] = {
    "send": Event.CLAIM,
    "reschedule": Event.DEFER,
    "suppress": Event.POLICY_DENIED,
    "expire": Event.DEADLINE_PASSED,
}


@dataclass
class _Attempt:
    n: int
    state: AttemptState = AttemptState.SENDING
    reached: bool = False  # accepted by the provider: counts against the resend budget


@dataclass
class _Ledger:
    """One intent and its attempts, as the replay's stand-in for the rows."""

    resend_budget: int
    action: Action
    state: IntentState = IntentState.PENDING
    attempts: list[_Attempt] = field(default_factory=list)
    sends: int = 0

    def move(self, event: Event) -> bool:
        if not allowed(self.state, event):
            return False
        self.state = next_state(self.state, event)
        return True

    def attempt(self, n: int | None) -> _Attempt | None:
        # A receipt for an attempt that does not exist stays unmatched.
        index = len(self.attempts) if n is None else n
        return self.attempts[index - 1] if 1 <= index <= len(self.attempts) else None

    def is_current(self, attempt: _Attempt) -> bool:
        return attempt.n == len(self.attempts)


@dataclass(frozen=True)
class TraceEntry:
    event: str
    attempt: int | None  # the attempt it concerned, when it concerned one
    applied_as: str | None  # the table event the ledger applied, when the intent moved
    before: IntentState
    after: IntentState
    effect: Effect

    def to_dict(self) -> dict[str, Any]:
        return {
            "event": self.event,
            "attempt": self.attempt,
            "applied_as": self.applied_as,
            "from": self.before.value,
            "to": self.after.value,
            "effect": self.effect,
        }

    def line(self) -> str:
        about = f" (attempt {self.attempt})" if self.attempt is not None else ""
        shown = f" as {self.applied_as}" if self.applied_as not in (None, self.event) else ""
        return f"{self.event}{about}{shown}: {self.before} -> {self.after} [{self.effect}]"


@dataclass(frozen=True)
class Replayed:
    """Where a sequence of events leaves one intent."""

    state: IntentState
    sends: int  # successful claims: provider calls the sequence would make
    attempts: tuple[AttemptState, ...]
    reached: int  # attempts the provider accepted: what the resend budget counts
    trace: tuple[TraceEntry, ...]


def replay_events(steps: Sequence[Step], *, action: Action, resend_budget: int) -> Replayed:
    """Apply `steps` to a new pending intent whose claims meet `action`."""
    ledger = _Ledger(resend_budget, action)
    trace = tuple(_apply(ledger, step) for step in steps)
    attempts = tuple(a.state for a in ledger.attempts)
    reached = sum(1 for a in ledger.attempts if a.reached)
    return Replayed(ledger.state, ledger.sends, attempts, reached, trace)


def _apply(ledger: _Ledger, step: Step) -> TraceEntry:
    before = ledger.state
    if step.event == Event.CLAIM.value:
        applied, n, attempt_moved = _claim(ledger)
    elif step.event in _RECEIPTS:
        applied, n, attempt_moved = _receipt(ledger, step)
    elif Event(step.event) in _ANSWERS:
        applied, n, attempt_moved = _answer(ledger, step, Event(step.event))
    else:
        event = Event(step.event)
        applied, n, attempt_moved = (event if ledger.move(event) else None), None, False
    effect = _effect(applied is not None, attempt_moved)
    name = applied.value if applied is not None else None
    return TraceEntry(step.event, n, name, before, ledger.state, effect)


def _effect(intent_moved: bool, attempt_moved: bool) -> Effect:
    if intent_moved:
        return "applied"
    return "attempt_only" if attempt_moved else "ignored"


Applied = tuple[Event | None, int | None, bool]  # intent event applied, attempt n, attempt moved


def _claim(ledger: _Ledger) -> Applied:
    # claim_due selects only claimable intents: a duplicate queue message,
    # or one arriving after cancel or expiry, finds nothing to claim.
    if not allowed(ledger.state, Event.CLAIM):
        return None, None, False
    event = _CLAIM_AS[ledger.action]
    ledger.move(event)
    if event is not Event.CLAIM:
        return event, None, False
    ledger.attempts.append(_Attempt(len(ledger.attempts) + 1))
    ledger.sends += 1  # network work starts once this claim commits: one send
    return event, len(ledger.attempts), True


def _answer(ledger: _Ledger, step: Step, event: Event) -> Applied:
    attempt = ledger.attempt(step.attempt)
    if attempt is None:
        return None, step.attempt, False
    target, sources = _ANSWERS[event]
    moved = attempt.state in sources and attempt_advances(attempt.state, target)
    if moved:
        attempt.state = target
        attempt.reached = attempt.reached or target is AttemptState.ACCEPTED
    intent_moved = ledger.is_current(attempt) and ledger.move(event)
    return (event if intent_moved else None), attempt.n, moved


def _receipt(ledger: _Ledger, step: Step) -> Applied:
    attempt = ledger.attempt(step.attempt)
    target = _RECEIPTS[step.event]
    # A repeated or older observation is stored but changes nothing.
    if attempt is None or not attempt_advances(attempt.state, target):
        return None, step.attempt if attempt is None else attempt.n, False
    attempt.state = target
    event = _receipt_event(ledger, attempt, step.event)
    intent_moved = event is not None and ledger.move(event)
    return (event if intent_moved else None), attempt.n, True


def _receipt_event(ledger: _Ledger, attempt: _Attempt, name: str) -> Event | None:
    if name == Event.DELIVERED.value:
        return Event.DELIVERED  # any attempt's delivery settles the business outcome
    if not ledger.is_current(attempt):
        return None  # an older attempt's bad news changes nothing now
    if name == UNDELIVERED:
        reached = sum(1 for a in ledger.attempts if a.reached)
        return on_undelivered(ledger.resend_budget, reached)
    return Event(name)


# --- running cases ----------------------------------------------------------


@dataclass(frozen=True)
class Difference:
    field: str
    expected: Value
    actual: Value

    def to_dict(self) -> dict[str, Any]:
        actual = _json(self.actual, self.expected)
        return {"field": self.field, "expected": _json(self.expected, None), "actual": actual}


@dataclass(frozen=True)
class CaseResult:
    case: Case
    actual: Mapping[str, Value]
    differences: tuple[Difference, ...]
    trace: tuple[TraceEntry, ...]

    @property
    def ok(self) -> bool:
        return not self.differences

    def to_dict(self) -> dict[str, Any]:
        expect = self.case.expect
        return {
            "name": self.case.name,
            "file": self.case.file,
            "why": self.case.why,
            "ok": self.ok,
            "expected": {k: _json(v, None) for k, v in expect.items()},
            "actual": {k: _json(v, expect.get(k)) for k, v in self.actual.items()},
            "differences": [d.to_dict() for d in self.differences],
            "trace": [t.to_dict() for t in self.trace],
        }


def gate_action(decision: Decision, request: PolicyRequest) -> Action:
    """What the claim gate does with a decision (dispatch.gate.decide): a
    passed deadline expires the intent before any other rule is consulted."""
    if request.expires_at is not None and request.expires_at <= request.now:
        return "expire"
    return dispatch_action(decision, request.expires_at)


def run_case(case: Case) -> CaseResult:
    decision = evaluate(case.policy, case.request)
    action = gate_action(decision, case.request)
    replayed = replay_events(case.steps, action=action, resend_budget=case.policy.resend_budget)
    actual: dict[str, Value] = {
        "decision.allowed": decision.allowed,
        "decision.code": decision.code,
        "decision.not_before": decision.not_before,
        "decision.detail": decision.detail,
        "decision.policy_version": decision.policy_version,
        "action": action,
        "final_state": replayed.state.value,
        "sends": replayed.sends,
        "effects": tuple(t.effect for t in replayed.trace),
        "attempts": tuple(a.value for a in replayed.attempts),
    }
    differences = tuple(
        Difference(key, want, actual[key])
        for key, want in case.expect.items()
        if actual[key] != want  # aware datetimes compare as instants
    )
    return CaseResult(case, actual, differences, replayed.trace)


@dataclass(frozen=True)
class Report:
    cases: tuple[CaseResult, ...]

    @property
    def ok(self) -> bool:
        return bool(self.cases) and all(c.ok for c in self.cases)

    @property
    def failed(self) -> tuple[CaseResult, ...]:
        return tuple(c for c in self.cases if not c.ok)

    def exit_code(self) -> int:
        return EXIT_OK if self.ok else EXIT_DIFFERENCES

    def format_text(self) -> str:
        lines = [line for result in self.cases for line in _case_lines(result)]
        passed = len(self.cases) - len(self.failed)
        lines.append(f"{len(self.cases)} cases: {passed} passed, {len(self.failed)} failed")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "total": len(self.cases),
            "passed": len(self.cases) - len(self.failed),
            "failed": len(self.failed),
            "cases": [c.to_dict() for c in self.cases],
        }


def _case_lines(result: CaseResult) -> list[str]:
    where = Path(result.case.file).name
    head = f"{'PASS' if result.ok else 'FAIL'} {result.case.name} [{where}]"
    if result.ok:
        return [head]
    lines = [head, f"     why: {result.case.why}"]
    for d in result.differences:
        shown = _text(d.actual, d.expected)
        lines.append(f"     {d.field}: expected {_text(d.expected, None)}, got {shown}")
    lines += [f"     event {i}: {t.line()}" for i, t in enumerate(result.trace, 1)]
    return lines


def _json(value: Value, like: Value) -> Any:
    if isinstance(value, datetime):
        return _in_zone_of(value, like).isoformat()
    return list(value) if isinstance(value, tuple) else value


def _text(value: Value, like: Value) -> str:
    if value is None:
        return "none"
    if isinstance(value, tuple):
        return "[" + ", ".join(value) + "]"
    return str(_json(value, like)).lower() if isinstance(value, bool) else str(_json(value, like))


def _in_zone_of(value: datetime, like: Value) -> datetime:
    # Show an actual time in the offset the fixture wrote its expectation in,
    # so "08:00-05:00 vs 07:00-05:00" reads at a glance.
    return value.astimezone(like.tzinfo) if isinstance(like, datetime) else value


def replay(path: Path) -> Report:
    """Load every fixture under `path` and run each case. Raises FixtureError."""
    return Report(tuple(run_case(case) for case in load_fixtures(path)))


def shipped_fixtures() -> Path:
    """The fixtures that ship with tidings (EU, US, races, expiry, ...)."""
    return Path(__file__).with_name("replay_fixtures")


def replay_command(path: Path, as_json: bool) -> int:
    """`tidings replay PATH [--json]`: print the report, return the exit code:
    0 every case matched, 1 some case differs, 2 the fixtures are invalid."""
    try:
        report = replay(path)
    except FixtureError as exc:
        if as_json:
            print(json.dumps({"ok": False, "error": str(exc)}, indent=2))
        else:
            print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    print(json.dumps(report.to_dict(), indent=2) if as_json else report.format_text())
    return report.exit_code()
