"""Which configured providers need a provider-side template id, per channel.

Some providers can send by a template of their own (SendGrid's dynamic
templates, the simulator's ``template_id``): an adapter declares the channels
it can do that for in ``provider_template_channels``. Whether a deployment
*does* is its choice, ``TIDINGS_<PROVIDER>_REQUIRE_TEMPLATE_ID=true``; then a
revision sent through it without ``provider_template_ids.<provider>`` would
reach the provider with no template, so ``tidings templates validate`` reports
it (PROVIDER_MAPPING_MISSING) and a bulk job refuses it before sending.

Read from the names in the environment alone: no adapter is built, so no
credential is needed to validate templates in a deploy pipeline.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping

from tidings.domain.errors import InvalidInput
from tidings.providers import settings as cfg
from tidings.providers.errors import ProviderConfigError
from tidings.templates.model import TemplateRevision

CHANNELS = ("sms", "email")


class ProviderMappingMissing(InvalidInput):
    """A job's template revision has no provider-side template id that a
    configured provider needs (HTTP 422, code PROVIDER_MAPPING_MISSING)."""

    code = "PROVIDER_MAPPING_MISSING"


def configured_providers(
    simulator_url: str | None, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The provider name per channel, as providers/routing.py chooses it."""
    env = os.environ if environ is None else environ
    if simulator_url:
        return dict.fromkeys(CHANNELS, "simulator")
    return {
        channel: name
        for channel in CHANNELS
        if (name := env.get(f"TIDINGS_{channel.upper()}_PROVIDER"))
    }


def required_template_ids(
    simulator_url: str | None, environ: Mapping[str, str] | None = None
) -> dict[str, tuple[str, ...]]:
    """Channel -> the configured providers that need a template id for it."""
    env = os.environ if environ is None else environ
    needs: dict[str, tuple[str, ...]] = {}
    for channel, name in configured_providers(simulator_url, env).items():
        settings = cfg.settings_from_env(name, env)
        if not cfg.flag(settings, "require_template_id", False, name):
            continue
        if channel not in cfg.adapter_class(name).provider_template_channels:
            # Asked of an adapter that cannot send by template: a misconfiguration
            # that would otherwise pass silently.
            raise ProviderConfigError(
                f"{name}: setting 'require_template_id' is set, but {name} "
                f"does not send {channel} by a provider-side template"
            )
        needs[channel] = (name,)
    return needs


def missing_template_ids(rev: TemplateRevision, providers: Collection[str]) -> list[str]:
    """The providers in ``providers`` that ``rev`` has no template id for."""
    ids = rev.provider_template_ids
    return sorted(p for p in set(providers) if not str(ids.get(p, "")).strip())


def ensure_template_ids(rev: TemplateRevision, providers: Collection[str]) -> None:
    missing = missing_template_ids(rev, providers)
    if missing:
        raise ProviderMappingMissing(
            "template",
            f"template {rev.name!r} revision {rev.revision} ({rev.channel}) has no "
            f"provider template id for {', '.join(missing)}: set provider_template_ids."
            f"{missing[0]} and publish a new revision",
        )
