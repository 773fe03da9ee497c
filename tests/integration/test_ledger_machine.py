"""Random event sequences against the real ledger, checked from the rows."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from tidings import ManualClock, StaleTransition, Tidings
from tidings.domain.intent import Intent
from tidings.domain.states import TERMINAL_INTENT, IntentState
from tidings.domain.transitions import Event, InvalidTransition, allowed
from tidings.store import ledger

from .conftest_helpers import make_tidings
from .dispatch_helpers import publish_offer_template


def build_machine(t: Tidings, clock: ManualClock) -> type[RuleBasedStateMachine]:
    counter = iter(range(1_000_000))

    class LedgerMachine(RuleBasedStateMachine):
        intents = Bundle("intents")

        def __init__(self) -> None:
            super().__init__()
            self.snapshots: dict[Any, Intent] = {}
            self.terminal_seen: dict[Any, IntentState] = {}

        @rule(target=intents)
        def create(self) -> Any:
            n = next(counter)
            intent = t.notify(
                idempotency_key=f"machine:{n}",
                channel="sms",
                recipient={"ref": f"m{n}", "phone": "+14155550123"},
                template="waitlist_offer",
                variables={"class_name": "Spin 7am", "deadline": "18:00"},
                purpose="transactional",
                event_class="waitlist_offer",
                expires_at=clock.now() + timedelta(hours=1),
            )
            self.snapshots[intent.id] = intent
            return intent.id

        @rule(intent_id=intents, event=st.sampled_from(list(Event)), stale=st.booleans())
        def apply(self, intent_id: Any, event: Event, stale: bool) -> None:
            clock.advance(1)
            current = t.get(intent_id)
            seen = self.snapshots[intent_id] if stale else current
            lease = clock.now() + timedelta(seconds=30)
            move = ledger.Move(lease_owner="w", lease_expires_at=lease, next_due_at=clock.now())
            with t.db.transaction() as conn:
                try:
                    moved = ledger.transition(
                        conn, seen, event, now=clock.now(), actor="m", move=move
                    )
                except InvalidTransition:
                    assert not allowed(seen.state, event)
                    return
                except StaleTransition:
                    assert seen.version != current.version
                    return
            assert seen.version == current.version, "a stale snapshot moved the intent"
            assert moved.version == current.version + 1
            self.snapshots[intent_id] = moved

        @invariant()
        def rows_tell_one_consistent_story(self) -> None:
            with t.db.transaction() as conn:
                for intent_id in self.snapshots:
                    intent = ledger.get_intent(conn, t.tenant, intent_id)
                    assert intent is not None
                    audit = conn.execute(
                        "SELECT version, from_state, to_state FROM transitions"
                        " WHERE tenant_id = %s AND intent_id = %s ORDER BY version",
                        (t.tenant, intent_id),
                    ).fetchall()
                    assert [r["version"] for r in audit] == list(range(1, intent.version + 1))
                    for before, after in itertools.pairwise(audit):
                        assert after["from_state"] == before["to_state"]
                    assert audit[-1]["to_state"] == intent.state.value
                    first_terminal = (
                        self.terminal_seen.setdefault(intent_id, intent.state)
                        if intent.state in TERMINAL_INTENT
                        else None
                    )
                    if first_terminal is not None:
                        assert intent.state is first_terminal

    return LedgerMachine


def test_ledger_state_machine(db_url: str) -> None:
    clock = ManualClock()
    t = make_tidings(db_url, clock)
    publish_offer_template(t)
    try:
        machine = build_machine(t, clock)
        machine.TestCase.settings = settings(
            max_examples=25,
            stateful_step_count=20,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
        machine.TestCase().runTest()
    finally:
        t.close()
