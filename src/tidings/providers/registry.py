"""Adapters by name: each adapter module registers a factory on import."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from tidings.providers.base import ProviderAdapter
from tidings.providers.catalog import ADAPTERS
from tidings.providers.errors import ProviderConfigError

AdapterFactory = Callable[[Mapping[str, Any]], ProviderAdapter]
_FACTORIES: dict[str, AdapterFactory] = {}


def register(name: str, factory: AdapterFactory) -> None:
    _FACTORIES[name] = factory


def registered() -> frozenset[str]:
    return frozenset(_FACTORIES) | frozenset(ADAPTERS)


def create(name: str, settings: Mapping[str, Any]) -> ProviderAdapter:
    # The catalog's adapters register themselves on import: `create` finds
    # them without every caller importing every adapter module first.
    if name not in _FACTORIES and name in ADAPTERS:
        importlib.import_module(ADAPTERS[name].module)
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ProviderConfigError(f"no provider adapter named {name!r}") from None
    return factory(settings)
