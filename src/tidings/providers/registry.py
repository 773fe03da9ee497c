"""Adapters by name: each adapter module registers a factory on import."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from tidings.providers.base import ProviderAdapter
from tidings.providers.errors import ProviderConfigError

AdapterFactory = Callable[[Mapping[str, Any]], ProviderAdapter]
_FACTORIES: dict[str, AdapterFactory] = {}
# Built-in adapters register themselves on import; this lets `create` find
# them without every caller importing every adapter module first.
_BUILTIN_MODULES = {"simulator": "tidings.providers.simulator.adapter"}


def register(name: str, factory: AdapterFactory) -> None:
    _FACTORIES[name] = factory


def registered() -> frozenset[str]:
    return frozenset(_FACTORIES) | frozenset(_BUILTIN_MODULES)


def create(name: str, settings: Mapping[str, Any]) -> ProviderAdapter:
    if name not in _FACTORIES and name in _BUILTIN_MODULES:
        importlib.import_module(_BUILTIN_MODULES[name])
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ProviderConfigError(f"no provider adapter named {name!r}") from None
    return factory(settings)
