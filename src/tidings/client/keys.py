"""The client's API keys of its tenant: list, read, create, revoke.

A key's plaintext is returned by its creation and nowhere else; rows show
ids, names, scopes and state (`live`, `expired`, `revoked`). A key made
with a `parent` (the key minting it) expires no later than the parent and
is revoked with it (store/api_keys.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from tidings.client.base import ClientBase
from tidings.domain.errors import InvalidInput, NotFound
from tidings.store import api_keys
from tidings.store.database import Row


class KeyMethods(ClientBase):
    def api_keys(self) -> list[dict[str, Any]]:
        """This tenant's keys, each with its `state` now (never the key itself)."""
        with self.db.transaction() as conn:
            rows = api_keys.list_keys(conn, self.tenant)
        return [self._with_state(row) for row in rows]

    def api_key(self, key_id: str) -> dict[str, Any]:
        """One of this tenant's keys, with its `state`; NotFound for another
        tenant's key as for a missing one."""
        with self.db.transaction() as conn:
            row = api_keys.get_key(conn, self.tenant, key_id)
        if row is None:
            raise NotFound(f"no API key {key_id!r}")
        return self._with_state(row)

    def create_api_key(
        self,
        scopes: Iterable[str],
        name: str,
        *,
        expires_at: datetime | None = None,
        expires_in_seconds: int | None = None,
        parent: str | None = None,
    ) -> tuple[str, str]:
        """A new key of this tenant: (key id, plaintext); show the plaintext
        once. It expires at `expires_at` or `expires_in_seconds` from now
        (not both), and no later than `parent`, the key minting it."""
        now = self.clock.now()
        if expires_at is not None and expires_in_seconds is not None:
            raise InvalidInput("expires_at", "give expires_at or expires_in_seconds, not both")
        if expires_in_seconds is not None:
            expires_at = now + timedelta(seconds=expires_in_seconds)
        with self.db.transaction() as conn:
            return api_keys.create_key(
                conn,
                self.tenant,
                scopes,
                name,
                now=now,
                expires_at=expires_at,
                parent=parent,
                vault=self.vault,
            )

    def revoke_api_key(self, key_id: str) -> list[str]:
        """Revoke the key now, and every key it minted (and theirs); the ids
        of those below it. Repeating it is harmless."""
        with self.db.transaction() as conn:
            api_keys.revoke(conn, self.tenant, key_id, now=self.clock.now())
            return api_keys.descendants(conn, self.tenant, key_id)

    def _with_state(self, row: Row) -> dict[str, Any]:
        return {**row, "state": api_keys.state_of(row, self.clock.now())}
