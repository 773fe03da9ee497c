"""Judging a shadow rollout: what tidings would have done against what the
system that really sent did (seed 000's rollout plan).

In shadow mode another system sends; tidings creates and decides each
intent and records what it would have done, then ends it `suppressed`
with code SHADOW_MODE, for good. `compare` lines those decisions up with
the live system's outcomes, matched by idempotency key, and counts where
the two agree: a send against a send, a suppression or expiry against no
send. Everything else is a difference worth reading before dispatch is
turned on: a send the live system did not make, a send tidings would have
refused, or one it would have held back until later (a quiet window, a
cap).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from tidings.domain.decision_codes import RETRYABLE_CODES

ACTIONS: Final = ("send", "reschedule", "suppress", "expire")
SENT: Final = "sent"
NOT_SENT: Final = "not_sent"
ABSENT: Final = "absent"
EXAMPLES: Final = 100


@dataclass(frozen=True)
class ShadowDecision:
    intent_id: str
    idempotency_key: str
    event_class: str
    channel: str
    country: str | None
    code: str  # the decision's code: ALLOWED, CONSENT_MISSING, QUIET_WINDOW ...
    action: str  # what the claim would have done: one of ACTIONS
    decided_at: str
    policy_version: str | None


@dataclass(frozen=True)
class LiveOutcome:
    idempotency_key: str
    sent: bool
    code: str | None = None  # the live system's own reason, shown as given


def action_of(would: str, recorded_action: str | None) -> str:
    """The action a shadow decision stood for; decisions recorded before
    the action was kept name only "send" or the denying code."""
    if recorded_action in ACTIONS:
        return recorded_action
    if would == "send":
        return "send"
    return "reschedule" if would in RETRYABLE_CODES else "suppress"


def agrees(action: str, live: str) -> bool:
    return (action == "send" and live == SENT) or (
        action in ("suppress", "expire") and live == NOT_SENT
    )


@dataclass
class Comparison:
    shadow_decisions: int = 0
    by_action: Counter[str] = field(default_factory=Counter)
    by_code: Counter[str] = field(default_factory=Counter)
    matrix: dict[str, Counter[str]] = field(default_factory=dict)
    agreed: int = 0
    differences: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)
    live_only: int = 0
    live_only_examples: list[str] = field(default_factory=list)
    compared: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "shadow_decisions": self.shadow_decisions,
            "by_action": dict(self.by_action),
            "by_code": dict(self.by_code),
            "compared_with_live": self.compared,
            "agreed": self.agreed,
            "differences": self.differences,
            "matrix": {a: dict(c) for a, c in self.matrix.items()},
            "difference_examples": self.examples,
            "live_without_shadow_decision": self.live_only,
            "live_without_shadow_decision_examples": self.live_only_examples,
        }


def compare(decisions: Iterable[ShadowDecision], live: Sequence[LiveOutcome] | None) -> Comparison:
    outcomes: Mapping[str, LiveOutcome] = {o.idempotency_key: o for o in live or ()}
    report = Comparison(compared=live is not None)
    seen: set[str] = set()
    for d in decisions:
        report.shadow_decisions += 1
        report.by_action[d.action] += 1
        report.by_code[d.code] += 1
        if live is None:
            continue
        seen.add(d.idempotency_key)
        outcome = outcomes.get(d.idempotency_key)
        said = ABSENT if outcome is None else SENT if outcome.sent else NOT_SENT
        report.matrix.setdefault(d.action, Counter())[said] += 1
        if agrees(d.action, said):
            report.agreed += 1
            continue
        report.differences += 1
        if len(report.examples) < EXAMPLES:
            report.examples.append(_example(d, said, outcome))
    for key in outcomes.keys() - seen:
        report.live_only += 1
        if len(report.live_only_examples) < EXAMPLES:
            report.live_only_examples.append(key)
    report.live_only_examples.sort()
    return report


def _example(d: ShadowDecision, said: str, outcome: LiveOutcome | None) -> dict[str, Any]:
    example: dict[str, Any] = {
        "intent_id": d.intent_id,
        "idempotency_key": d.idempotency_key,
        "event_class": d.event_class,
        "channel": d.channel,
        "country": d.country,
        "tidings": {"action": d.action, "code": d.code, "policy_version": d.policy_version},
        "live": said,
        "decided_at": d.decided_at,
    }
    if outcome is not None and outcome.code:
        example["live_code"] = outcome.code
    return example
