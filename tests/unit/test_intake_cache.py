"""The create's cache of template revisions and policy versions: bounded
per tenant and in tenants, nothing remembered that was not found, a
version parsed once."""

from __future__ import annotations

from typing import Any
from unittest import mock

from tidings.intake import cache as intake_cache
from tidings.intake.cache import Candidates, IntakeCache
from tidings.policies import builtin_document
from tidings.templates.model import TemplateRevision

DOCUMENT = builtin_document("default")


def revision(name: str, number: int = 1) -> TemplateRevision:
    return TemplateRevision(
        tenant_id="t", name=name, revision=number, channel="sms", locale="en",
        subject=None, body="hello", html_body=None, required_variables=(),
        attachment_policy="none", provider_template_ids={},
    )  # fmt: skip


def known(name: str) -> Candidates:
    return Candidates((revision(name),), newest=1)


def key(name: str) -> tuple[str, str, int | None]:
    return (name, "sms", None)


def test_nothing_is_recalled_before_both_policy_and_template_were_read() -> None:
    cache = IntakeCache()
    cache.remember_template("t", key("offer"), known("offer"))
    assert cache.recall("t", key("offer")) is None  # the current policy was never read
    cache.remember_policy("t", None, None)  # read: the tenant has none
    remembered = cache.recall("t", key("offer"))
    assert remembered is not None and remembered.policy is None
    assert remembered.candidates == known("offer")
    assert cache.recall("t", key("other")) is None
    assert cache.recall("u", key("offer")) is None


def test_a_template_not_found_is_not_remembered() -> None:
    cache = IntakeCache()
    cache.remember_policy("t", None, None)
    cache.remember_template("t", key("offer"), Candidates((), newest=None))
    assert cache.recall("t", key("offer")) is None


def test_a_version_is_parsed_once_and_the_newest_read_is_the_guess() -> None:
    cache = IntakeCache()
    cache.remember_template("t", key("offer"), known("offer"))
    with mock.patch.object(intake_cache, "parse_policy", wraps=intake_cache.parse_policy) as parse:
        first = cache.remember_policy("t", "default-1", DOCUMENT)
        again = cache.remember_policy("t", "default-1", DOCUMENT)
    assert first is again and parse.call_count == 1
    other: dict[str, Any] = {**DOCUMENT, "version": "default-2"}
    cache.remember_policy("t", "default-2", other)
    remembered = cache.recall("t", key("offer"))
    assert remembered is not None and remembered.policy is not None
    assert remembered.policy.version == "default-2"


def test_each_tenant_is_bounded_on_its_own() -> None:
    cache = IntakeCache(templates=2)
    for tenant in ("busy", "quiet"):
        cache.remember_policy(tenant, None, None)
    cache.remember_template("quiet", key("a"), known("a"))
    for name in ("a", "b", "c"):
        cache.remember_template("busy", key(name), known(name))
    assert cache.recall("busy", key("a")) is None  # the least recently used went
    assert cache.recall("busy", key("b")) is not None
    assert cache.recall("busy", key("c")) is not None
    assert cache.recall("quiet", key("a")) is not None  # another tenant's entries stay


def test_the_tenants_are_bounded_least_recently_used_first() -> None:
    cache = IntakeCache(tenants=2)
    for tenant in ("a", "b"):
        cache.remember_policy(tenant, None, None)
        cache.remember_template(tenant, key("x"), known("x"))
    assert cache.recall("a", key("x")) is not None  # a is now the most recent
    cache.remember_policy("c", None, None)
    assert cache.recall("b", key("x")) is None
    assert cache.recall("a", key("x")) is not None


def test_old_policy_versions_are_bounded() -> None:
    cache = IntakeCache(policies=2)
    cache.remember_template("t", key("x"), known("x"))
    for n in range(1, 4):
        cache.remember_policy("t", f"v{n}", {**DOCUMENT, "version": f"v{n}"})
    with mock.patch.object(intake_cache, "parse_policy", wraps=intake_cache.parse_policy) as parse:
        cache.remember_policy("t", "v3", DOCUMENT)
        cache.remember_policy("t", "v1", {**DOCUMENT, "version": "v1"})
    assert parse.call_count == 1  # v3 was kept, v1 had been evicted
