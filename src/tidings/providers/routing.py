"""Which adapter sends which channel, from configuration.

`TIDINGS_SIMULATOR_URL` makes the simulator at that address the provider
for both channels. Otherwise `TIDINGS_SMS_PROVIDER` and
`TIDINGS_EMAIL_PROVIDER` name registered adapters, configured from their
own `TIDINGS_<PROVIDER>_*` variables (docs/providers.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from tidings.config import Settings
from tidings.providers.base import ProviderAdapter, ProviderConfigError
from tidings.providers.simulator_adapter import SimulatorAdapter


def adapters_from_settings(
    settings: Settings, environ: Mapping[str, str] | None = None
) -> dict[str, ProviderAdapter]:
    env = os.environ if environ is None else environ
    if settings.simulator_url:
        secret = settings.simulator_webhook_secret.get_secret_value()
        simulator = SimulatorAdapter(settings.simulator_url, secret)
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


def _from_env(name: str, env: Mapping[str, str]) -> ProviderAdapter:
    from tidings.providers.settings import adapter_from_env

    adapter: ProviderAdapter = adapter_from_env(name, env)
    return adapter


def by_name(adapters: Mapping[str, ProviderAdapter]) -> dict[str, ProviderAdapter]:
    return {adapter.name: adapter for adapter in adapters.values()}
