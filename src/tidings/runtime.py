"""What every layer under the client runs on: a database, a clock, a vault
and the settings.

The client (`Tidings`) composes one; workers, alerts, metrics and the
console take it, never the client: they need the pool and the time, not
`notify` and `cancel`, so they cannot grow a dependency on the facade.

    runtime = Tidings().runtime
    worker = Worker(runtime, adapters)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tidings.domain.clock import Clock
from tidings.intake.cache import IntakeCache
from tidings.platform.settings import Settings
from tidings.platform.vault import Vault
from tidings.store.database import Database
from tidings.store.wakeups import Waker


@dataclass(frozen=True)
class Runtime:
    db: Database
    clock: Clock
    vault: Vault
    settings: Settings
    # Template revisions and policy versions creates have read, shared by
    # every view of one client (`for_tenant`, the API's callers).
    intake: IntakeCache = field(default_factory=IntakeCache)
    # Wakes idle workers for intents created alone, once committed.
    waker: Waker | None = None

    @property
    def url(self) -> str:
        """The database's URL, for connections outside the pool."""
        return self.db.url

    @property
    def listen_url(self) -> str | None:
        """Where LISTEN works: the database's URL, unless that leads through
        a transaction pooler (then only a direct `listen_url`, or none)."""
        if self.settings.listen_url:
            return self.settings.listen_url
        return None if self.settings.transaction_pooling else self.db.url
