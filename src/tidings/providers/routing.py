"""Which adapter sends which channel, from configuration.

`TIDINGS_SIMULATOR_URL` makes the simulator at that address the provider
for both channels. Otherwise `TIDINGS_SMS_PROVIDER` and
`TIDINGS_EMAIL_PROVIDER` name registered adapters, configured from their
own `TIDINGS_<PROVIDER>_*` variables (docs/providers.md).
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Mapping
from urllib.parse import urlsplit

from tidings.platform.settings import Settings
from tidings.providers.base import ProviderAdapter
from tidings.providers.errors import ProviderConfigError
from tidings.providers.simulator import DEFAULT_WEBHOOK_SECRET
from tidings.providers.simulator.adapter import SimulatorAdapter

log = logging.getLogger("tidings.webhooks")


def adapters_from_settings(
    settings: Settings,
    environ: Mapping[str, str] | None = None,
    *,
    serving_host: str | None = None,
) -> dict[str, ProviderAdapter]:
    """The adapter per channel. `serving_host` is where the API listens,
    for the simulator's webhook secret (`simulator_webhook_secret`)."""
    env = os.environ if environ is None else environ
    if settings.simulator_url:
        secret = simulator_webhook_secret(settings, serving_host)
        simulator = SimulatorAdapter(
            settings.simulator_url, secret, profile=settings.simulator_profile
        )
        return {"sms": simulator, "email": simulator}
    chosen: dict[str, ProviderAdapter] = {}
    for channel in ("sms", "email"):
        name = env.get(f"TIDINGS_{channel.upper()}_PROVIDER")
        if name:
            chosen[channel] = _from_env(name, env)
    if not chosen:
        raise ProviderConfigError(
            "no provider configured: set TIDINGS_SIMULATOR_URL, or TIDINGS_SMS_PROVIDER "
            "and/or TIDINGS_EMAIL_PROVIDER"
        )
    return chosen


def simulator_webhook_secret(settings: Settings, serving_host: str | None) -> str | None:
    """The secret the simulator's webhooks must be signed with, or None to refuse them.

    The configured one (TIDINGS_SIMULATOR_WEBHOOK_SECRET) if set. Otherwise
    the simulator's well-known development secret, and only when nobody
    else can reach either side: the API listens on loopback, the simulator
    is on loopback and no public URL is configured. Anywhere else that
    secret is public knowledge, and would let anyone forge receipts and STOPs.
    """
    if settings.simulator_webhook_secret is not None:
        return settings.simulator_webhook_secret.get_secret_value() or None
    simulator_host = urlsplit(settings.simulator_url or "").hostname
    local = (
        is_loopback(serving_host)
        and is_loopback(simulator_host)
        and not getattr(settings, "public_base_url", None)
    )
    return DEFAULT_WEBHOOK_SECRET if local else None


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _from_env(name: str, env: Mapping[str, str]) -> ProviderAdapter:
    from tidings.providers.settings import adapter_from_env

    adapter: ProviderAdapter = adapter_from_env(name, env)
    return adapter


def by_name(adapters: Mapping[str, ProviderAdapter]) -> dict[str, ProviderAdapter]:
    return {adapter.name: adapter for adapter in adapters.values()}


def webhook_adapters(settings: Settings, *, serving_host: str | None) -> dict[str, ProviderAdapter]:
    """The API's webhook receivers, by provider name. The API itself needs
    no provider, so a configuration without one serves with none, and says
    so once at start: otherwise a provider's receipts meet 404 in silence."""
    try:
        return by_name(adapters_from_settings(settings, serving_host=serving_host))
    except Exception as exc:  # webhooks need adapters; the API itself does not
        log.warning(
            "no provider configured; provider webhooks will answer 404",
            extra={"why": str(exc)},
        )
        return {}
