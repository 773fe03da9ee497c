from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tidings.domain.states import TERMINAL_INTENT, AttemptState, IntentState
from tidings.domain.transitions import (
    RULES,
    TABLE,
    Event,
    InvalidTransition,
    allowed,
    attempt_advances,
    next_state,
    on_undelivered,
    states_document,
)

S = IntentState

SEED_000_TABLE = [
    (S.PENDING, Event.CLAIM, S.SENDING),
    (S.SENDING, Event.PROVIDER_ACCEPTED, S.ACCEPTED),
    (S.ACCEPTED, Event.DELIVERED, S.DELIVERED),
    (S.ACCEPTED, Event.UNDELIVERED_RETRYABLE, S.RESEND_DUE),
    (S.PENDING, Event.CANCEL, S.CANCELED),
    (S.RESEND_DUE, Event.CANCEL, S.CANCELED),
    (S.PENDING, Event.POLICY_DENIED, S.SUPPRESSED),
    (S.RESEND_DUE, Event.POLICY_DENIED, S.SUPPRESSED),
]


@pytest.mark.parametrize(("state", "event", "target"), SEED_000_TABLE)
def test_seed_000_rows_hold(state: IntentState, event: Event, target: IntentState) -> None:
    assert next_state(state, event) is target


@pytest.mark.parametrize("state", sorted(set(IntentState) - TERMINAL_INTENT))
def test_deadline_expires_every_nonterminal_state(state: IntentState) -> None:
    assert next_state(state, Event.DEADLINE_PASSED) is S.EXPIRED


@pytest.mark.parametrize("state", sorted(TERMINAL_INTENT))
@pytest.mark.parametrize("event", list(Event))
def test_terminal_states_never_move(state: IntentState, event: Event) -> None:
    with pytest.raises(InvalidTransition):
        next_state(state, event)


def test_only_pending_or_resend_due_can_start_a_send() -> None:
    sources = {state for (state, event), rule in TABLE.items() if rule.target is S.SENDING}
    assert sources == {S.PENDING, S.RESEND_DUE}


def test_unknown_outcome_never_leads_to_a_send() -> None:
    assert not allowed(S.RECONCILING, Event.CLAIM)
    assert next_state(S.SENDING, Event.OUTCOME_UNKNOWN) is S.RECONCILING
    # Only proof that the provider never got it reopens the intent.
    assert next_state(S.RECONCILING, Event.NOT_RECEIVED) is S.PENDING


def test_no_rule_is_shadowed() -> None:
    pairs = [(s, r.event) for r in RULES for s in r.source]
    assert len(pairs) == len(set(pairs))


@pytest.mark.parametrize(
    ("budget", "made", "event"),
    [
        (0, 1, Event.RESEND_BUDGET_EXHAUSTED),
        (1, 1, Event.UNDELIVERED_RETRYABLE),
        (1, 2, Event.RESEND_BUDGET_EXHAUSTED),
        (2, 2, Event.UNDELIVERED_RETRYABLE),
        (2, 3, Event.RESEND_BUDGET_EXHAUSTED),
    ],
)
def test_resend_budget_counts_resends(budget: int, made: int, event: Event) -> None:
    assert on_undelivered(budget, made) is event


def test_attempts_only_move_forward() -> None:
    A = AttemptState
    assert attempt_advances(A.SENDING, A.ACCEPTED)
    assert attempt_advances(A.ACCEPTED, A.DELIVERED)
    assert attempt_advances(A.UNKNOWN, A.DELIVERED)
    assert not attempt_advances(A.ACCEPTED, A.ACCEPTED)
    assert not attempt_advances(A.DELIVERED, A.UNDELIVERED)
    assert not attempt_advances(A.UNDELIVERED, A.DELIVERED)
    assert not attempt_advances(A.ACCEPTED, A.SENDING)


@given(st.sampled_from(list(AttemptState)), st.sampled_from(list(AttemptState)))
def test_attempt_order_is_antisymmetric(a: AttemptState, b: AttemptState) -> None:
    assert not (attempt_advances(a, b) and attempt_advances(b, a))


def test_states_document_is_current() -> None:
    from pathlib import Path

    doc = Path(__file__).parents[2] / "docs" / "states.md"
    assert doc.read_text() == states_document(), (
        "docs/states.md is stale: python -m tidings.domain.transitions > docs/states.md"
    )


class IntentMachine(RuleBasedStateMachine):
    """Random event sequences against the pure table, with a shadow audit."""

    def __init__(self) -> None:
        super().__init__()
        self.state = S.PENDING
        self.version = 1
        self.audit: list[tuple[int, IntentState, IntentState]] = []
        self.reached_terminal_at: int | None = None

    @rule(event=st.sampled_from(list(Event)))
    def apply(self, event: Event) -> None:
        before = self.state
        try:
            after = next_state(before, event)
        except InvalidTransition:
            return
        self.version += 1
        self.state = after
        self.audit.append((self.version, before, after))
        if after in TERMINAL_INTENT and self.reached_terminal_at is None:
            self.reached_terminal_at = self.version

    @invariant()
    def versions_increase_by_one_and_are_audited(self) -> None:
        assert [v for v, _, _ in self.audit] == list(range(2, self.version + 1))

    @invariant()
    def the_audit_chains(self) -> None:
        current = S.PENDING
        for _, before, after in self.audit:
            assert before is current
            current = after
        assert current is self.state

    @invariant()
    def terminal_stays_terminal(self) -> None:
        if self.reached_terminal_at is not None:
            assert self.version == self.reached_terminal_at
            assert self.state in TERMINAL_INTENT


TestIntentMachine = IntentMachine.TestCase
