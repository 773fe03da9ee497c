"""Replaying lifecycle events on one intent, the way dispatch applies them.

How events are applied follows the dispatch code without importing it (it
needs PostgreSQL); what a claim does with a decision is not followed but
shared, through domain/claiming.py:

- `claim` is the claim transaction (`dispatch.claim`/`dispatch.gate`): only
  a claimable intent (pending or resend_due) is claimed, and the claim's
  verdict for the decision picks its one transition (claim, one provider
  send; defer; policy_denied; deadline_passed). A replayed queue message
  finds nothing to claim.
- provider answers and lookups (`dispatch.record`, `dispatch.reconcile`)
  settle an attempt only from the states the attempts store accepts them
  from (domain/attempts.py, shared), and move the intent when the table
  allows.
- receipts (`dispatch.observe`) must advance their attempt
  (`attempt_advances`) or change nothing at all; an older attempt's bad
  news never moves the intent, while any attempt's delivery does.
- everything else (cancel, deadline_passed, ...) moves the intent only.

An event the table refuses is recorded as `ignored` (or `attempt_only`
when the attempt record still moved), exactly as the ledger refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from tidings.domain.attempts import ACCEPTS_FROM, NOT_RECEIVED_FROM, WORKER_SETTLES_FROM
from tidings.domain.claiming import claim_event, verdict_of
from tidings.domain.policy import Action
from tidings.domain.states import CLAIMABLE, AttemptState, IntentState
from tidings.domain.transitions import Event, allowed, attempt_advances, next_state, on_undelivered
from tidings.replay.model import UNDELIVERED, Effect, Step

# What each provider answer or lookup result does to its attempt, and the
# attempt states the attempts store accepts it from (domain/attempts.py).
# The intent moves by the table regardless, because the worker records its
# own call's outcome on the intent.
_ANSWERS: Final[Mapping[Event, tuple[AttemptState, frozenset[AttemptState]]]] = {
    Event.PROVIDER_ACCEPTED: (AttemptState.ACCEPTED, ACCEPTS_FROM),
    Event.PROVIDER_DEFERRED: (AttemptState.FAILED, WORKER_SETTLES_FROM),
    Event.PROVIDER_REJECTED: (AttemptState.FAILED, WORKER_SETTLES_FROM),
    Event.PREPARE_FAILED: (AttemptState.FAILED, WORKER_SETTLES_FROM),
    Event.OUTCOME_UNKNOWN: (AttemptState.UNKNOWN, WORKER_SETTLES_FROM),
    Event.NOT_RECEIVED: (AttemptState.FAILED, NOT_RECEIVED_FROM),
}

# Delivery receipts (dispatch.observe): what each says about its attempt.
_RECEIPTS: Final[Mapping[str, AttemptState]] = {
    Event.DELIVERED.value: AttemptState.DELIVERED,
    UNDELIVERED: AttemptState.UNDELIVERED,
    Event.UNDELIVERED_RETRYABLE.value: AttemptState.UNDELIVERED,
    Event.RESEND_BUDGET_EXHAUSTED.value: AttemptState.UNDELIVERED,
    Event.DELIVERY_FAILED.value: AttemptState.FAILED,
}

ATTEMPT_EVENTS: Final = frozenset({e.value for e in _ANSWERS} | set(_RECEIPTS))


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
    if ledger.state not in CLAIMABLE:
        return None, None, False
    event = claim_event(verdict_of(ledger.action))
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
