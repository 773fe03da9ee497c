"""Building adapters from settings: ``TIDINGS_<PROVIDER>_*`` variables, and their parsing.

``adapter_from_env("twilio", os.environ)`` reads every variable starting with
``TIDINGS_TWILIO_``, lower-cases the rest of its name into a settings key
(``TIDINGS_TWILIO_AUTH_TOKEN`` -> ``auth_token``) and calls the registered
factory. The helpers below are what every factory uses to read its mapping,
so a missing or malformed setting fails the same way everywhere: a
ProviderConfigError naming the key, never the value (values may be secrets).
"""

from __future__ import annotations

import importlib
from collections.abc import Generator, Mapping
from typing import Any

import httpx

from tidings.providers.base import DEFAULT_TIMEOUT, ProviderAdapter
from tidings.providers.catalog import ADAPTERS
from tidings.providers.errors import ProviderConfigError
from tidings.providers.messages import AttachmentLoader
from tidings.providers.registry import create

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


def env_prefix(name: str) -> str:
    return f"TIDINGS_{name.upper()}_"


def settings_from_env(name: str, environ: Mapping[str, str]) -> dict[str, str]:
    prefix = env_prefix(name)
    return {k[len(prefix) :].lower(): v for k, v in environ.items() if k.startswith(prefix)}


def adapter_from_env(name: str, environ: Mapping[str, str]) -> ProviderAdapter:
    return build(name, settings_from_env(name, environ))


def build(name: str, settings: Mapping[str, Any]) -> ProviderAdapter:
    """The adapter `name` from a settings mapping (`create` imports its module)."""
    return create(name, settings)


def adapter_class(name: str) -> type[ProviderAdapter]:
    entry = ADAPTERS.get(name)
    if entry is None:
        raise ProviderConfigError(f"no provider adapter named {name!r}")
    module = importlib.import_module(entry.module)
    found: type[ProviderAdapter] = getattr(module, entry.adapter_class)
    return found


# --- reading a settings mapping --------------------------------------------


def required(settings: Mapping[str, Any], key: str, provider: str) -> str:
    value = settings.get(key)
    if value is None or str(value).strip() == "":
        raise ProviderConfigError(f"{provider}: setting {key!r} is required")
    return str(value)


def optional(settings: Mapping[str, Any], key: str, default: str | None = None) -> str | None:
    value = settings.get(key)
    return default if value is None or str(value).strip() == "" else str(value)


def number(settings: Mapping[str, Any], key: str, default: float, provider: str) -> float:
    value = settings.get(key)
    if value is None or value == "":
        return default
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ProviderConfigError(f"{provider}: setting {key!r} must be a number") from None


def flag(settings: Mapping[str, Any], key: str, default: bool, provider: str) -> bool:
    value = settings.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ProviderConfigError(f"{provider}: setting {key!r} must be true or false")


def words(settings: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """A comma-separated setting (or a list) as a tuple of non-empty strings."""
    value = settings.get(key)
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(str(item).strip() for item in items if str(item).strip())


def timeout(settings: Mapping[str, Any], provider: str) -> float:
    return number(settings, "timeout", DEFAULT_TIMEOUT, provider)


def loader(settings: Mapping[str, Any]) -> AttachmentLoader | None:
    """The attachment loader, which only a program (never an env variable) can supply."""
    value = settings.get("attachment_loader")
    if value is not None and not callable(value):
        raise ProviderConfigError("setting 'attachment_loader' must be callable")
    return value


class HeaderAuth(httpx.Auth):
    """Puts a credential in one request header.

    Kept in an auth object rather than in default headers or an adapter
    attribute: nothing that reprs or logs a client or request shows it.
    """

    def __init__(self, header: str, value: str):
        self._header = header
        self._value = value

    def __repr__(self) -> str:
        return f"HeaderAuth({self._header!r}, [redacted])"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers[self._header] = self._value
        yield request
