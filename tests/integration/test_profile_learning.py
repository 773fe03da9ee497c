"""Workers learn the profile from the simulator they talk to, and a lookup
way the provider says it does not offer (501 NOT_SUPPORTED) hands over to
the next way within the same check instead of spending the polling budget.

Measured from outside before this: workers told nothing assumed `ideal`,
asked the simulator playing Twilio for our key, got 501 on every check and
ended `unknown` attempts the list search could have proved absent.
"""

from __future__ import annotations

from typing import Any

import httpx

from tidings import IntentState, ManualClock, Tidings
from tidings.domain.keys import attempt_key
from tidings.platform.settings import Settings
from tidings.providers.simulator import SimulatorCore
from tidings.providers.simulator.adapter import SimulatorAdapter
from tidings.providers.simulator.in_process import (
    IN_PROCESS_URL,
    CoreTransport,
    InProcessSimulatorAdapter,
)

from .dispatch_helpers import offer, publish_offer_template, simulator, worker
from .test_profile_reconcile import crash_after_mark, deliveries, lookups, settle, short_polls


def _never_reached(tidings: Tidings, clock: ManualClock, adapter_of: Any) -> Any:
    """A call marked started that never reached the provider (it plays
    Twilio), looked up by a worker whose adapter `adapter_of(core)` builds."""
    publish_offer_template(tidings)
    short_polls(tidings)
    core = simulator(clock, profile="twilio")
    w = worker(tidings, core, adapter_of(core), lease_seconds=30)
    intent = offer(tidings)
    crash_after_mark(w, call=False)
    settle(w, clock, 120)
    w.dispatch_once()
    return core, intent


def _told_nothing(core: SimulatorCore) -> SimulatorAdapter:
    """The adapter a worker builds from settings naming no profile
    (providers/routing.py), over the core instead of a socket."""
    transport = CoreTransport(core)
    client = httpx.Client(base_url=IN_PROCESS_URL, transport=transport)
    assert Settings().simulator_profile is None  # nothing is assumed by default
    return SimulatorAdapter(IN_PROCESS_URL, client=client)


def test_a_worker_told_nothing_learns_the_profile_and_proves_absence_by_search(
    tidings: Tidings, clock: ManualClock
) -> None:
    searched = lookups("simulator", "search")
    core, intent = _never_reached(tidings, clock, _told_nothing)
    got = tidings.get(intent.id)
    assert got.state in (IntentState.ACCEPTED, IntentState.DELIVERED)
    assert next((a.n, a.state, a.code) for a in got.attempts) == (1, "failed", "NOT_RECEIVED")
    assert deliveries(core) == {attempt_key(intent.id, 2): 1}
    assert lookups("simulator", "search") > searched


def test_a_501_moves_on_to_the_next_way_instead_of_spending_the_budget(
    tidings: Tidings, clock: ManualClock
) -> None:
    """Told `ideal` while the simulator plays Twilio (its profile changed
    under the worker): the key lookup answers 501, and the same check goes
    on to the list search."""
    searched = lookups("simulator", "search")
    core, intent = _never_reached(
        tidings, clock, lambda core: InProcessSimulatorAdapter(core, profile="ideal")
    )
    got = tidings.get(intent.id)
    assert got.state in (IntentState.ACCEPTED, IntentState.DELIVERED)
    assert next((a.n, a.code) for a in got.attempts) == (1, "NOT_RECEIVED")
    assert got.attempts[0].check_count < 6
    assert deliveries(core) == {attempt_key(intent.id, 2): 1}
    assert lookups("simulator", "search") > searched
