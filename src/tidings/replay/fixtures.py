"""Loading replay fixtures: JSON files read strictly into cases.

Every error names its file and field, so an operator can fix a fixture
without reading this code. See docs/replay.md for the format.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence, Set
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, Final, TypeVar

from tidings.domain.policy import CapUsage, ConsentEvidence, PolicyRequest, cap_windows
from tidings.domain.policy_document import Policy, PolicyError, parse_policy
from tidings.domain.states import AttemptState, IntentState
from tidings.policies import load_builtin
from tidings.replay.events import ATTEMPT_EVENTS
from tidings.replay.model import ACTIONS, CODES, EFFECTS, EVENT_NAMES, Case, Step, Value

T = TypeVar("T")


class FixtureError(ValueError):
    """A fixture file is unreadable or invalid; the message names file and field."""


class _Invalid(ValueError):
    """A field is invalid; load_file prefixes the file name."""


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
    if attempt is not None and event not in ATTEMPT_EVENTS:
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
