"""What every part of the client shares: the runtime, the tenant it acts
for, and the tenant row made on first write.

`Tidings` (client.py) is assembled from parts by concept: intents there,
contacts, jobs and configuration in `contacts.py`,
`jobs.py` and `setup.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar
from uuid import UUID

from tidings.domain.clock import Clock
from tidings.domain.errors import NotFound
from tidings.platform.settings import Settings
from tidings.platform.vault import Vault
from tidings.runtime import Runtime
from tidings.store import ledger
from tidings.store.database import Database

T = TypeVar("T")


@dataclass(frozen=True)
class Recorded(Generic[T]):
    """What an idempotent create returns: the object, and whether this call
    created it (`False`: the key was replayed, and `item` is the first)."""

    item: T
    created: bool


class ClientBase:
    runtime: Runtime
    tenant: str
    _tenant_ready: bool

    @property
    def db(self) -> Database:
        return self.runtime.db

    @property
    def clock(self) -> Clock:
        return self.runtime.clock

    @property
    def vault(self) -> Vault:
        return self.runtime.vault

    @property
    def settings(self) -> Settings:
        return self.runtime.settings

    def _ensure_tenant(self) -> None:
        # Committed on our own connection, so a caller's rollback never
        # takes the tenant row with it.
        if not self._tenant_ready:
            with self.db.transaction() as conn:
                ledger.ensure_tenant(conn, self.tenant)
            self._tenant_ready = True


def as_uuid(value: UUID | str) -> UUID:
    if isinstance(value, UUID):
        return value
    try:
        return UUID(str(value))
    except ValueError:
        raise NotFound(f"no intent {value}") from None
