"""Random lives of intents under random clocks and policies, purged at
random moments, checked from the rows: evidence never goes before its
clock, and never outlives it by more than the rest of its intent's month
(docs/retention.md, "Months of evidence")."""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, precondition, rule

from tests.conftest import clone_database, drop_database
from tidings import ManualClock, NotFound, Tidings
from tidings.dispatch.retention import purge
from tidings.domain.evidence_months import Month
from tidings.policies import builtin_document

from .conftest_helpers import make_tidings
from .dispatch_helpers import offer, publish_offer_template, simulator, worker
from .test_evidence_months import first_month

RECIPIENT_DAYS = 365  # every policy here keeps the decision a year


@dataclass(frozen=True)
class Clocks:
    attempts: int
    observations: int


def _evidence(t: Tidings, ids: list[UUID]) -> dict[str, set[tuple[Any, ...]]]:
    """Every evidence row of `ids`: (table, intent, row id, received_at)."""
    found: dict[str, set[tuple[Any, ...]]] = {"transitions": set(), "observations": set()}
    with t.db.transaction() as conn:
        for row in conn.execute(
            "SELECT intent_id, id FROM transitions WHERE intent_id = ANY(%s)", (ids,)
        ):
            found["transitions"].add((row["intent_id"], row["id"], None))
        for row in conn.execute(
            "SELECT intent_id, id, received_at FROM observations WHERE intent_id = ANY(%s)",
            (ids,),
        ):
            found["observations"].add((row["intent_id"], row["id"], row["received_at"]))
    return found


def build_machine(server_url: str, template: str) -> type[RuleBasedStateMachine]:
    numbers = itertools.count()
    versions = itertools.count()

    class RetentionMachine(RuleBasedStateMachine):
        """Each example on a database of its own, from the first month made."""

        intents = Bundle("intents")

        def __init__(self) -> None:
            super().__init__()
            self.database, url = clone_database(server_url, template)
            self.clock = ManualClock(first_month(url).starts_at + timedelta(days=1, hours=12))
            self.tenant = make_tidings(url, self.clock)
            publish_offer_template(self.tenant)
            self.clocks: dict[str, Clocks] = {}
            self.publish(180, 90)
            self.ids: list[UUID] = []

        def teardown(self) -> None:
            self.tenant.close()
            drop_database(server_url, self.database)

        def publish(self, attempts: int, observations: int) -> None:
            doc = copy.deepcopy(builtin_document("default"))
            doc["version"] = f"machine-{next(versions)}"
            doc["retention"] = {
                **doc["retention"],
                "attempt_evidence_days": attempts,
                "observation_days": observations,
            }
            self.tenant.publish_policy(doc)
            self.clocks[doc["version"]] = Clocks(attempts, observations)

        @rule(attempts=st.sampled_from([7, 30, 180]), observations=st.sampled_from([3, 30, 90]))
        def new_policy(self, attempts: int, observations: int) -> None:
            self.publish(attempts, observations)

        @rule(target=intents)
        def create(self) -> UUID:
            return self._offer(None)

        @rule(target=intents)
        def create_for_later(self) -> UUID:
            """An intent that keeps its month from being dropped for a long time."""
            return self._offer(self.clock.now() + timedelta(days=400))

        def _offer(self, not_before: datetime | None) -> UUID:
            intent = offer(self.tenant, next(numbers), not_before=not_before, expires_at=None)
            self.ids.append(intent.id)
            return UUID(str(intent.id))

        @rule()
        def send_due(self) -> None:
            w = worker(self.tenant, simulator(self.clock))
            w.dispatch_once()
            self.clock.advance(10)
            w.reconcile_once()

        @rule(intent_id=intents)
        def cancel(self, intent_id: UUID) -> None:
            try:
                if not self.tenant.get(intent_id).terminal:
                    self.tenant.cancel(intent_id, reason="member_left")
            except NotFound:
                pass

        @rule(days=st.integers(0, 200), hours=st.integers(0, 23))
        def advance(self, days: int, hours: int) -> None:
            self.clock.advance(days=days, hours=hours)

        @precondition(lambda self: bool(self.ids))
        @rule()
        def purge_and_check(self) -> None:
            now = self.clock.now()
            before = _evidence(self.tenant, self.ids)
            facts = {i: self._facts(i) for i in self.ids}
            purge(self.tenant.db, now)
            after = _evidence(self.tenant, self.ids)
            alive = {i for i in self.ids if self._exists(i)}
            for table, rows in before.items():
                for intent_id, _, received_at in rows - after[table]:
                    self._may_be_gone(table, facts[intent_id], received_at, intent_id in alive)
            for table, rows in after.items():
                for intent_id, _, received_at in rows:
                    self._may_stay(table, facts[intent_id], received_at)
            self.ids = [i for i in self.ids if i in alive]

        def _facts(self, intent_id: UUID) -> dict[str, Any]:
            intent = self.tenant.get(intent_id)
            return {
                "ended": intent.terminal_at,
                "clocks": self.clocks[str(intent.policy_version)],
                "month_end": Month.of_intent(intent_id).ends_at,
            }

        def _exists(self, intent_id: UUID) -> bool:
            try:
                self.tenant.get(intent_id)
            except NotFound:
                return False
            return True

        def _days(self, table: str, facts: dict[str, Any]) -> int:
            clocks: Clocks = facts["clocks"]
            return clocks.observations if table == "observations" else clocks.attempts

        def _may_be_gone(
            self, table: str, facts: dict[str, Any], received: datetime | None, alive: bool
        ) -> None:
            now, ended = self.clock.now(), facts["ended"]
            assert ended is not None, f"{table} of an intent not final went"
            if not alive:
                assert ended + timedelta(days=RECIPIENT_DAYS) <= now
                return
            since = received if table == "observations" else ended
            assert since + timedelta(days=self._days(table, facts)) <= now, (
                f"{table} went before its clock"
            )

        def _may_stay(self, table: str, facts: dict[str, Any], received: datetime | None) -> None:
            ended = facts["ended"]
            if ended is None:
                return  # not final: everything stays
            since = max(received if table == "observations" else ended, facts["month_end"])
            assert self.clock.now() <= since + timedelta(days=self._days(table, facts)), (
                f"{table} outlived its clock and its month"
            )

    return RetentionMachine


def test_retention_state_machine(pg_server_url: str, template_db: str) -> None:
    machine = build_machine(pg_server_url, template_db)
    machine.TestCase.settings = settings(
        max_examples=20,
        stateful_step_count=16,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    machine.TestCase().runTest()
