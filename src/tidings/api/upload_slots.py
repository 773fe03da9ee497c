"""How many uploads one tenant may have in flight in one API process.

An upload lasts as long as its client takes to send it (bounded by the
body timeouts in api/streaming.py). Even holding no database connection
while it waits, each one is a request the process is serving; a bound per
tenant keeps one tenant's many slow uploads from crowding out everybody
else's. Over it, 429 TOO_MANY_UPLOADS with a `Retry-After`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tidings.api.problems import TooManyRequests

# An upload takes seconds to minutes; asking again sooner mostly fails again.
RETRY_AFTER_SECONDS = 5


class UploadSlots:
    def __init__(self, per_tenant: int) -> None:
        self.per_tenant = max(1, per_tenant)
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    @contextmanager
    def hold(self, tenant: str) -> Iterator[None]:
        """One slot of `tenant`'s for the block, or 429 if all are taken."""
        with self._lock:
            held = self._held.get(tenant, 0)
            if held >= self.per_tenant:
                raise TooManyRequests(
                    "TOO_MANY_UPLOADS",
                    f"this tenant already has {held} uploads in progress; "
                    "finish one before starting another",
                    RETRY_AFTER_SECONDS,
                )
            self._held[tenant] = held + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._held[tenant] - 1
                if left:
                    self._held[tenant] = left
                else:
                    del self._held[tenant]
