"""A worker's settings: batch sizes, concurrency, leases and the intervals
of its maintenance steps (dispatch/steps.py, dispatch/runner.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class WorkerConfig:
    batch_size: int = 256
    # The part of a claim single intents may take while jobs wait too
    # (Settings.urgent_share).
    urgent_share: float = 0.9
    # A job intent this near its deadline goes first (Settings.deadline_horizon_seconds).
    deadline_horizon_seconds: float = 600.0
    concurrency: Mapping[str, int] = field(default_factory=lambda: {"sms": 8, "email": 8})
    lease_seconds: float = 30.0
    idle_wait: float = 1.0
    maintenance_interval: float = 1.0
    # Retention at start, then this often; math.inf: never (`tidings purge` runs it).
    purge_interval: float = 3600.0
    # See reconcile.NOT_RECEIVED_AFTER_SECONDS: must exceed the longest a
    # provider may take to record a request that is already on its way.
    not_received_after: float = 60.0
    # Event pushes go to tenants' own servers: a pool of their own, this
    # many tenants at once, each request within this deadline overall.
    event_push_concurrency: int = 4
    event_push_deadline: float = 10.0
    # Status checks looked up side by side (each a round trip to the provider).
    reconcile_concurrency: int = 8
    seed: int | None = None
