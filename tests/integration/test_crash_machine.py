"""Random crashes at random steps, under a random provider profile, against
the real ledger: no message twice, none lost, unknown only where it must be.

Each example plays one profile (the simulator offering only what that
provider offers), through that provider's real adapter where the simulator
speaks its wire (Twilio, Postmark, SendGrid, Vonage, Infrai: harness/wires.py),
receipts signed and checked that provider's way. Workers claim, then
carry on or die: before the call-started mark, after it, after the
provider took the call, or not at all; time passes, receipts arrive,
sweeps recover leases, reconciliation looks things up; intents are
canceled now and then. Throughout, the provider
never has two messages of one intent. At the end everything settles, and
each intent reached the provider exactly once, or ended unknown after a
started call at a provider that could not tell whether it arrived.
"""

from __future__ import annotations

import copy
import itertools
import time
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
)

from tests.profile_matrix import CHANNEL, finds_lost_answers, proves_absence
from tidings import ManualClock, Tidings
from tidings.dispatch.call_start import Verdict
from tidings.dispatch.message import TemplateCache, prepare
from tidings.dispatch.observe import apply_observation
from tidings.policies import builtin_document
from tidings.providers.base import ProviderAdapter
from tidings.providers.correlation import expand
from tidings.providers.simulator.in_process import InProcessSimulatorAdapter

from .conftest_helpers import make_tidings
from .dispatch_helpers import simulator, worker
from .wired_helpers import is_wired, posted_receipts, real_adapter

SENT = {"accepted", "timeout_after_accept"}
HOOK = "http://in-process/hook"
POLLS = {
    "first_check_after_seconds": 5,
    "factor": 2,
    "max_interval_seconds": 20,
    "jitter": 0.0,
    "max_checks": 5,
    "give_up_after_seconds": 120,
}


def build_machine(t: Tidings, clock: ManualClock) -> type[RuleBasedStateMachine]:
    counter = itertools.count()

    class CrashMachine(RuleBasedStateMachine):
        intents = Bundle("intents")

        def __init__(self) -> None:
            super().__init__()
            self.mine: list[Any] = []
            self.canceled: set[Any] = set()

        @initialize(target=intents, profile=st.sampled_from(sorted(CHANNEL)), n=st.integers(2, 4))
        def play(self, profile: str, n: int) -> Any:
            self.profile, self.channel = profile, CHANNEL[profile]
            self.wired = is_wired(profile)
            self.core = simulator(
                clock, profile=profile, webhook_url=HOOK, receipt_delay_ms=2000, wire=self.wired
            )
            # Where the simulator speaks the provider's own wire, that
            # provider's real adapter sends, looks up and checks receipts.
            self.adapter: ProviderAdapter = (
                real_adapter(profile, self.core, HOOK)
                if self.wired
                else InProcessSimulatorAdapter(self.core)
            )
            # Its steps keep nothing in memory between calls that a crash
            # would lose (no heartbeat runs here): one object plays every
            # worker, the ones that die and the ones that carry on.
            self.w = worker(t, self.core, self.adapter, lease_seconds=30)
            # A few intents to one number from the start: crashes need claims.
            return multiple(*(self._new_intent() for _ in range(n)))

        def _worker(self) -> Any:
            return self.w

        @rule(target=intents)
        def create(self) -> Any:
            return self._new_intent()

        def _new_intent(self) -> Any:
            n = next(counter)
            recipient = {"ref": f"m{n}", "phone": "+14155550123", "email": f"m{n}@example.com"}
            recipient.pop("email" if self.channel == "sms" else "phone")
            intent = t.notify(
                idempotency_key=f"crash:{n}",
                channel=self.channel,
                recipient=recipient,
                template=f"crash-{self.channel}",
                purpose="transactional",
                event_class="crash",
            )
            self.mine.append(intent.id)
            return intent.id

        @rule(fate=st.sampled_from(["live", "after_claim", "after_mark", "after_send"]))
        def dispatch(self, fate: str) -> None:
            w = self._worker()
            for claimed in w.claim(self.channel, 3):
                if fate == "live":
                    w.send_and_record(claimed)
                    continue
                if fate == "after_claim" or w._starts.verdict(claimed) is not Verdict.GO:
                    continue
                if fate == "after_send":
                    message, _, _ = prepare(t.db, claimed, t.vault, TemplateCache(), {})
                    self.adapter.send(message, claimed.attempt_key)

        @rule(seconds=st.integers(1, 40))
        def time_passes(self, seconds: int) -> None:
            clock.advance(seconds)
            self._receipts()
            w = self._worker()
            w.sweep_once()
            w.reconcile_once()

        @rule(intent_id=intents)
        def cancel(self, intent_id: Any) -> None:
            if not t.get(intent_id).terminal:
                t.cancel(intent_id, reason="member_left")
                self.canceled.add(intent_id)

        def _receipts(self) -> None:
            if self.wired:
                requests = posted_receipts(self.core, time.time)
            else:
                assert isinstance(self.adapter, InProcessSimulatorAdapter)
                requests = self.adapter.due_webhooks()
            with t.db.transaction() as conn:
                for request in requests:
                    for obs in self.adapter.verify_webhook(request):
                        apply_observation(conn, obs, "webhook", clock.now())

        def _messages(self) -> Counter[Any]:
            by_key = {str(i): i for i in self.mine}
            sent: Counter[Any] = Counter()
            for entry in self.core.ledger():
                if entry["outcome"] in SENT:
                    # Our key as the provider carried it (Vonage's client-ref compacts it).
                    key = expand(entry["idempotency_key"]) or entry["idempotency_key"]
                    sent[by_key.get(key.split(":")[1])] += 1
            return sent

        @invariant()
        def never_two_messages_of_one_intent(self) -> None:
            if hasattr(self, "core"):
                assert set(self._messages().values()) <= {1}, self._messages()

        def teardown(self) -> None:
            if not hasattr(self, "core"):
                return
            for _ in range(40):  # everything settles: leases, lookups, budgets
                clock.advance(15)
                self._receipts()
                w = self._worker()
                w.sweep_once()
                w.reconcile_once()
                w.dispatch_once(self.channel)
            sent = self._messages()
            for intent_id in self.mine:
                got = t.get(intent_id)
                state, messages = got.state.value, sent[intent_id]
                if intent_id in self.canceled and state == "canceled":
                    assert messages <= 1
                    continue
                assert state in ("delivered", "unknown"), (self.profile, state, got.attempts)
                if state == "delivered":
                    assert messages == 1
                    continue
                assert got.attempts and got.attempts[-1].call_started_at is not None
                if messages == 0:  # it never arrived, yet nobody could tell
                    assert not proves_absence(self.profile), (self.profile, got.attempts)
                else:  # it arrived, and nothing the provider offers told us so
                    assert not finds_lost_answers(self.profile), (self.profile, got.attempts)

    return CrashMachine


def test_random_crashes_under_every_profile_never_lose_or_double(db_url: str) -> None:
    clock = ManualClock()
    t = make_tidings(db_url, clock)
    for channel in ("sms", "email"):
        subject = "Hello" if channel == "email" else None
        t.publish_template(f"crash-{channel}", channel=channel, subject=subject, body="Hello")
    doc: dict[str, Any] = copy.deepcopy(builtin_document("default"))
    doc.update(version="crash-machine", poll_schedule=POLLS)
    t.publish_policy(doc)
    try:
        machine = build_machine(t, clock)
        machine.TestCase.settings = settings(
            max_examples=12,
            stateful_step_count=12,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
        machine.TestCase().runTest()
    finally:
        t.close()
