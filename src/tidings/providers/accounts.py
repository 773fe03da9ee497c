"""The adapter of every provider account an attempt went through.

Each attempt records its provider account (`attempts.provider`, from
`ProviderAdapter.account`), and its lookups and receipts go to that
account's adapter whatever the channel sends through today. A channel
moved to another provider (`TIDINGS_SMS_PROVIDER=twilio` became `vonage`)
leaves attempts in flight at the old one: R000 asks to "retain the old
adapter during migration until active attempts become terminal". Here the
old adapter is built from its own settings (`TIDINGS_<NAME>_*`, still in
the environment during the migration) the first time one of its attempts
is looked up or one of its webhooks arrives, and kept for the life of the
process: it costs nothing once idle.

An account whose adapter cannot be built (its settings are gone) is
remembered as missing for a while, so its attempts' checks fail fast and
count against their budget instead of being skipped forever.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping

from tidings.providers.base import ProviderAdapter
from tidings.providers.catalog import ADAPTERS
from tidings.providers.errors import ProviderConfigError

log = logging.getLogger("tidings.providers")
# How long an account that could not be built is not tried again.
RETRY_MISSING_SECONDS = 60.0

Factory = Callable[[str], ProviderAdapter]


def from_environment(account: str) -> ProviderAdapter:
    """A retired account's adapter from its `TIDINGS_<NAME>_*` settings."""
    from tidings.providers.settings import adapter_from_env

    return adapter_from_env(account, os.environ)


def _buildable(account: str) -> bool:
    """Only names of adapters that exist: a webhook path is anyone's to
    choose, and an unknown one must cost nothing, not a remembered failure."""
    return account in ADAPTERS


class ProviderAccounts(Mapping[str, ProviderAdapter]):
    """Adapters by account: the current ones, and retired ones built on demand."""

    def __init__(
        self,
        current: Mapping[str, ProviderAdapter],
        factory: Factory | None = from_environment,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """`current`: the adapters in use, by account (by name, where the
        account is the adapter's name)."""
        self._adapters = dict(current)
        self._current = frozenset(self._adapters)
        self._factory = factory
        self._missing: dict[str, float] = {}
        self._lock = threading.Lock()
        self._now = monotonic

    def __getitem__(self, account: str) -> ProviderAdapter:
        found = self.get(account)
        if found is None:
            raise KeyError(account)
        return found

    def get(self, account: str, default: ProviderAdapter | None = None) -> ProviderAdapter | None:  # type: ignore[override]
        with self._lock:
            found = self._adapters.get(account)
            if found is not None or self._factory is None or not _buildable(account):
                return found or default
            if self._now() < self._missing.get(account, float("-inf")):
                return default
            try:
                built = self._factory(account)
            except ProviderConfigError as exc:
                self._missing[account] = self._now() + RETRY_MISSING_SECONDS
                log.error(
                    "provider account %s has attempts or webhooks but cannot be configured: "
                    "%s; set its TIDINGS_%s_* settings again until its attempts are final",
                    account,
                    exc,
                    account.upper(),
                )
                return default
            if built.account != account:
                built.close()
                return default
            self._adapters[account] = built
            log.info("provider account %s loaded for its attempts still in flight", account)
            return built

    def retired(self) -> list[str]:
        """Accounts loaded only for the attempts they still have."""
        with self._lock:
            return sorted(set(self._adapters) - self._current)

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            return iter(list(self._adapters))

    def __len__(self) -> int:
        with self._lock:
            return len(self._adapters)

    def close(self) -> None:
        with self._lock:
            adapters = list(self._adapters.values())
        for adapter in adapters:
            adapter.close()
