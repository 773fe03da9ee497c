"""The names `import tidings` promises: adding or removing one is a decision, not an accident."""

from __future__ import annotations

import tidings
from tidings.providers.base import ProviderAdapter

PUBLIC_NAMES = {
    "AlreadyLifted",
    "AlreadyTerminal",
    "Attempt",
    "AttemptState",
    "AudienceUploadUsed",
    "Clock",
    "CohortShrink",
    "Conflict",
    "IdempotencyConflict",
    "Intent",
    "IntentState",
    "InvalidInput",
    "ManualClock",
    "NotFound",
    "Page",
    "ProviderAdapter",
    "RequestLimited",
    "StaleTransition",
    "Suppression",
    "SystemClock",
    "Tidings",
    "TidingsError",
    "TimelineEntry",
}


def test_all_is_pinned() -> None:
    assert set(tidings.__all__) == PUBLIC_NAMES
    assert len(tidings.__all__) == len(PUBLIC_NAMES), "a name is listed twice"


def test_every_public_name_resolves() -> None:
    for name in tidings.__all__:
        assert getattr(tidings, name) is not None, name


def test_provider_adapter_is_the_one_adapters_subclass() -> None:
    # ADDING_PROVIDERS.md tells users to subclass it.
    assert tidings.ProviderAdapter is ProviderAdapter
