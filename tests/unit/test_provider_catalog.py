"""The provider catalog, the adapters, the simulator's profiles and
docs/providers.md agree: a provider added to one and not the others fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tidings.providers import catalog
from tidings.providers.catalog import (
    ADAPTERS,
    COMMON_SETTINGS,
    PROVIDERS,
    Provider,
    played_profiles,
)
from tidings.providers.registry import registered
from tidings.providers.settings import adapter_class, build
from tidings.providers.simulator.profiles import PROFILE_CHOICES, PROFILES

ROOT = Path(__file__).resolve().parents[2]
PROVIDERS_DOC = (ROOT / "docs" / "providers.md").read_text()
GUIDE = (ROOT / "docs" / "guides" / "providers.md").read_text()
SOURCE = ROOT / "src"
# What a settings mapping is read with (tidings.providers.settings).
_READ = re.compile(r"\b(?:required|optional|flag|number|words)\(\s*settings,\s*\"(\w+)\"")
# Modules that read settings on behalf of several adapters.
_SHARED_READERS = (
    "tidings/providers/aws_base.py",
    "tidings/providers/sns_signature.py",
    # The canaries' test credentials (Twilio's), never a member message's.
    "tidings/providers/canary_targets.py",
)


def _source(module: str) -> str:
    return (SOURCE / (module.replace(".", "/") + ".py")).read_text()


def _table(heading: str) -> list[list[str]]:
    """The rows of the first table under `heading`, as lists of cells."""
    section = PROVIDERS_DOC.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


@pytest.mark.parametrize("entry", ADAPTERS.values(), ids=list(ADAPTERS))
def test_each_entry_names_its_adapter_and_channels(entry: Provider) -> None:
    adapter = adapter_class(entry.name)
    assert adapter.name == entry.name
    assert adapter.channels == entry.channels
    assert entry.name in registered()


@pytest.mark.parametrize("entry", PROVIDERS.values(), ids=list(PROVIDERS))
def test_each_provider_reads_exactly_the_settings_it_declares(entry: Provider) -> None:
    own = {s.key for s in entry.settings}
    read = set(_READ.findall(_source(entry.module)))
    assert read <= own | set(COMMON_SETTINGS[entry.transport])
    shared = "".join((SOURCE / path).read_text() for path in _SHARED_READERS)
    assert own <= read | set(_READ.findall(shared))


@pytest.mark.parametrize("entry", PROVIDERS.values(), ids=list(PROVIDERS))
def test_secrets_stay_out_of_the_adapters_repr(entry: Provider) -> None:
    settings = {s.key: f"value-of-{s.key}" for s in entry.settings if s.required}
    settings |= {s.key: f"secret-{s.key}-marker" for s in entry.settings if s.secret}
    settings |= {"base_url": "https://provider.test"} if "base_url" in settings else {}
    adapter = build(entry.name, settings)
    try:
        assert not [s for s in settings.values() if "marker" in s and s in repr(adapter)]
    finally:
        adapter.close()


def test_each_profile_plays_a_catalog_provider_on_its_channels() -> None:
    played = {p.profile: p for p in PROVIDERS.values() if p.profile is not None}
    assert set(PROFILES) - {"ideal"} == set(played)
    for name, entry in played.items():
        assert PROFILES[name].provider is entry
        assert PROFILES[name].channels == entry.channels
    assert PROFILE_CHOICES.startswith(", ".join(PROFILES))


def test_docs_have_a_capability_row_per_provider_saying_its_channels() -> None:
    rows = {row[1].strip("`"): row[0] for row in _table("What each adapter can do")}
    assert set(rows) == set(PROVIDERS)
    words = {"sms": "SMS", "email": "e-mail"}
    for name, entry in PROVIDERS.items():
        assert rows[name] == entry.docs_title
        for channel, word in words.items():
            assert (word in entry.docs_title) == (channel in entry.channels), name


def test_docs_name_each_providers_simulator_profile() -> None:
    rows = _table("What each provider offers for reconciliation")
    profiles = {re.match(r"`(\w+)`", row[-1]).group(1) for row in rows}  # type: ignore[union-attr]
    assert profiles == {p.profile for p in PROVIDERS.values() if p.profile is not None}


def test_docs_list_every_providers_settings_and_no_other() -> None:
    documented = set()
    for row in _table("Configuration"):
        documented |= set(re.findall(r"`(TIDINGS_\w+)`", row[0]))
    declared = {p.variable(s.key) for p in PROVIDERS.values() for s in p.settings}
    assert documented == declared
    required = {p.variable(s.key) for p in PROVIDERS.values() for s in p.settings if s.required}
    for row in _table("Configuration"):
        for variable in re.findall(r"`(TIDINGS_\w+)`", row[0]):
            assert (variable in required) == (row[1] == "yes"), variable


def test_docs_say_how_each_provider_is_tested() -> None:
    assert len(_table("How each adapter is tested, and what that proves")) == len(PROVIDERS)


def test_the_guide_has_a_set_up_section_per_provider() -> None:
    assert set(re.findall(r"^### .* \{#(\w+)\}$", GUIDE, re.MULTILINE)) == set(PROVIDERS)


@pytest.mark.parametrize("channel", ["sms", "email"])
def test_the_guide_names_every_adapter_of_each_channel(channel: str) -> None:
    line = re.search(rf"TIDINGS_{channel.upper()}_PROVIDER=\w+ +# (.*)$", GUIDE, re.MULTILINE)
    assert line is not None
    named = [name.strip() for name in line.group(1).split(",")]
    assert named == [a.name for a in ADAPTERS.values() if channel in a.channels]


def test_the_played_profiles_are_the_providers_profiles() -> None:
    assert set(played_profiles()) == set(PROFILES) - {"ideal"}


def test_the_simulator_is_an_adapter_but_no_provider() -> None:
    assert catalog.SIMULATOR.name not in PROVIDERS
    assert next(iter(ADAPTERS)) == catalog.SIMULATOR.name
