from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from tidings import ManualClock, Tidings
from tidings.dispatch.runner import Worker
from tidings.dispatch.steps import WorkerConfig
from tidings.providers.base import ProviderAdapter
from tidings.providers.outcomes import SendResult
from tidings.providers.simulator.core import SimulatorCore
from tidings.providers.simulator.in_process import InProcessSimulatorAdapter
from tidings.providers.simulator.records import Reply

OFFER_BODY = "A spot opened in {{ class_name }}. Reply by {{ deadline }} to claim it."


def simulator(clock: ManualClock, **config: Any) -> SimulatorCore:
    core = SimulatorCore(clock=lambda: clock.now().timestamp())
    if config:
        core.configure(config)
    return core


class Listening(SimulatorCore):
    """The simulator, also keeping each send request it received in memory:
    a test reads what reached the provider, never a body we stored."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock=lambda: clock.now().timestamp())
        self.received: list[dict[str, Any]] = []

    def send(self, channel: str, payload: Any) -> Reply:
        self.received.append(dict(payload))
        return super().send(channel, payload)


def worker(
    t: Tidings,
    core: SimulatorCore,
    adapter: ProviderAdapter | None = None,
    accounts_factory: Callable[[str], Any] | None = None,
    **config: Any,
) -> Worker:
    """A worker over the in-process simulator. Retired provider accounts are
    built by `accounts_factory` (none: a test never reads the environment)."""
    adapter = adapter or InProcessSimulatorAdapter(core)
    # Checks one after the other: the seeded jitter then lands the same way.
    worker_config = WorkerConfig(seed=7, **{"reconcile_concurrency": 1, **config})
    return Worker(
        t.runtime,
        {"sms": adapter, "email": adapter},
        config=worker_config,
        accounts_factory=accounts_factory,
    )


class CancelsOnTheWay(InProcessSimulatorAdapter):
    """The real in-process simulator, with `cancel` committing while the
    request is on its way: after the worker's last read, before the
    provider has it (the awkward ordering of R000.6, docs/requirements.md)."""

    def __init__(self, core: SimulatorCore, cancel: Callable[[], object]) -> None:
        super().__init__(core)
        self.cancel = cancel

    def send(self, message: Any, idempotency_key: str) -> SendResult:
        self.cancel()
        return super().send(message, idempotency_key)


def racing_worker(t: Tidings, core: SimulatorCore, cancel: Callable[[], object]) -> Worker:
    """A worker whose SMS calls each let `cancel` commit on the way."""
    return Worker(t.runtime, {"sms": CancelsOnTheWay(core, cancel)}, config=WorkerConfig(seed=7))


def publish_offer_template(t: Tidings) -> None:
    t.publish_template(
        "waitlist_offer",
        channel="sms",
        body=OFFER_BODY,
        required_variables=["class_name", "deadline"],
    )


def offer(t: Tidings, n: int = 1, **overrides: Any) -> Any:
    return t.notify(**offer_request(t, n, **overrides))


def offer_request(t: Tidings, n: int = 1, **overrides: Any) -> dict[str, Any]:
    """`notify`'s fields for the `n`th member's waitlist offer."""
    request: dict[str, Any] = {
        "idempotency_key": f"waitlist:771:{1800 + n}:offer:1",
        "channel": "sms",
        "recipient": {"ref": f"member-{1800 + n}", "phone": "+14155550123"},
        "template": "waitlist_offer",
        "variables": {"class_name": "Spin 7am", "deadline": "18:00"},
        "purpose": "transactional",
        "event_class": "waitlist_offer",
        "expires_at": t.clock.now() + timedelta(minutes=30),
    }
    request.update(overrides)
    return request


def sends(core: SimulatorCore, key_prefix: str = "") -> list[dict[str, Any]]:
    return [e for e in core.ledger() if e["idempotency_key"].startswith(key_prefix)]
