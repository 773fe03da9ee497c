"""Running replay cases and reporting how they compare with their fixtures."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from tidings.domain.claiming import claim_action
from tidings.domain.policy import evaluate
from tidings.replay.events import TraceEntry, replay_events
from tidings.replay.fixtures import FixtureError, load_fixtures
from tidings.replay.model import Case, Value

EXIT_OK: Final = 0
EXIT_DIFFERENCES: Final = 1
EXIT_INVALID: Final = 2


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


def run_case(case: Case) -> CaseResult:
    decision = evaluate(case.policy, case.request)
    # What the claim does with the decision, by the claim's own rules.
    action = claim_action(decision, now=case.request.now, expires_at=case.request.expires_at)
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
    return Path(__file__).parent.parent / "replay_fixtures"


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
