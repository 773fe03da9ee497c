"""Replaying any queue message, status observation or cancellation, in any
interleaving, never creates an unauthorized second message (issue 4)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from tests.conftest import clone_database, drop_database
from tidings import IntentState, ManualClock, Tidings
from tidings.dispatch.observe import apply_observation
from tidings.domain import ids
from tidings.domain.states import TERMINAL_INTENT
from tidings.providers.simulator.in_process import InProcessSimulatorAdapter

from .conftest_helpers import make_tidings
from .dispatch_helpers import offer, publish_offer_template, simulator, worker

SENT = {"accepted", "timeout_after_accept"}


def build(server_url: str, template: str) -> type[RuleBasedStateMachine]:
    class Replays(RuleBasedStateMachine):
        """One example, one world: its own database, clock and simulator.

        Hypothesis replays an example's choices and expects the same draws
        back; `replay_a_receipt` samples from the receipts seen so far, so
        everything that decides how many there are (the rows a worker can
        claim, the time, the simulator's seed) must come from the example
        alone, never from one that ran before it.
        """

        def __init__(self) -> None:
            super().__init__()
            # Each example's clock starts at the same moment, behind the
            # process-wide uuid7 state: without this every id would take the
            # latest millisecond an earlier example reached and a 12-bit
            # counter carried over from them, and once that wraps, ids (so
            # the claim order of intents due at the same time) stop
            # following creation order.
            ids._last[:] = [0, 0]
            self.clock = ManualClock()
            self.db_name, url = clone_database(server_url, template)
            try:
                self.t: Tidings = make_tidings(url, self.clock)
                publish_offer_template(self.t)
            except BaseException:
                drop_database(server_url, self.db_name)
                raise
            self.intents: list[Any] = []
            self.seen_webhooks: list[Any] = []
            self.canceled_at: dict[Any, Any] = {}

        def teardown(self) -> None:
            self.t.close()
            drop_database(server_url, self.db_name)

        # The seed is drawn, not counted, so a replayed example gets the same
        # simulator decisions back while examples still differ from each other.
        @initialize(seed=st.integers(0, 2**32 - 1))
        def start_simulator(self, seed: int) -> None:
            self.core = simulator(
                self.clock,
                receipt_delay_ms=500,
                duplicate_rate=0.3,
                reorder=True,
                delivered_share=0.5,
                webhook_url="http://in-process/hook",
                seed=seed,
            )
            self.adapter = InProcessSimulatorAdapter(self.core)
            self.worker = worker(self.t, self.core)
            self.worker.adapters = {"sms": self.adapter, "email": self.adapter}
            self.worker.by_name = {"simulator": self.adapter}

        @rule(budget=st.integers(0, 2))
        def create(self, budget: int) -> None:
            n = len(self.intents)
            intent = offer(
                self.t,
                n,
                idempotency_key=f"replay:{n}",
                resend_budget=budget,
                expires_at=self.clock.now() + timedelta(minutes=10),
            )
            self.intents.append(intent.id)

        @precondition(lambda self: self.intents)
        @rule(times=st.integers(1, 3))
        def dispatch(self, times: int) -> None:
            for _ in range(times):  # a queue delivering the same wake-up again
                self.worker.dispatch_once()

        @precondition(lambda self: self.intents)
        @rule(data=st.data())
        def cancel(self, data: st.DataObject) -> None:
            intent_id = _pick(data, self.intents)
            for _ in range(data.draw(st.integers(1, 2))):
                try:
                    self.t.cancel(intent_id, reason="member_left")
                    self.canceled_at.setdefault(intent_id, self.clock.now())
                except Exception:  # already terminal: the replay is refused
                    pass

        @rule(seconds=st.sampled_from([0.2, 1, 6, 30]))
        def time_passes(self, seconds: float) -> None:
            self.clock.advance(seconds)

        @rule()
        def receipts_arrive(self) -> None:
            for request in self.adapter.due_webhooks():
                self.seen_webhooks.append(request)
                self._apply(request)

        @precondition(lambda self: self.seen_webhooks)
        @rule(data=st.data())
        def replay_a_receipt(self, data: st.DataObject) -> None:
            self._apply(_pick(data, self.seen_webhooks))

        @rule()
        def reconcile(self) -> None:
            self.worker.sweep_once()
            self.worker.reconcile_once()

        def _apply(self, request: Any) -> None:
            with self.t.db.transaction() as conn:
                for obs in self.adapter.verify_webhook(request):
                    apply_observation(conn, obs, "webhook", self.clock.now())

        @invariant()
        def no_unauthorized_second_message(self) -> None:
            sent = Counter(e["idempotency_key"] for e in self.core.ledger() if e["outcome"] in SENT)
            assert all(n == 1 for n in sent.values()), sent
            for intent_id in self.intents:
                got = self.t.get(intent_id)
                reached = [a for a in got.attempts if a.attempt_key in sent]
                assert len(reached) <= 1 + got.resend_budget
                if intent_id in self.canceled_at:
                    assert got.state is IntentState.CANCELED
                    after = [a for a in got.attempts if a.created_at > self.canceled_at[intent_id]]
                    assert after == [], "an attempt started after the cancel committed"
                if got.state in TERMINAL_INTENT:
                    assert got.terminal_at is not None

    return Replays


def _pick(data: st.DataObject, items: list[Any]) -> Any:
    """One of `items`, drawn the same way however many there are: how many
    receipts a world has seen is not always the same between a run and
    Hypothesis's replay of it, and a draw whose bounds follow the count then
    fails as a flaky strategy instead of testing the example."""
    return items[data.draw(st.integers(0, 2**16)) % len(items)]


def test_replays_never_send_twice(pg_server_url: str, template_db: str) -> None:
    machine = build(pg_server_url, template_db)
    machine.TestCase.settings = settings(
        max_examples=40,
        stateful_step_count=25,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    machine.TestCase().runTest()
