"""What a create remembers between calls: template revisions and policy
versions, per tenant, bounded.

A revision and a policy version never change once published, so their
content can be kept. Which of them is *current* does change, and only the
database decides it: what is kept here as current is a guess, checked by
the create's insert (`create_intent` in store/sql/queries/ledger.sql),
which writes nothing when the guess is stale. Then the create reads again
(`intake_context`) and the read replaces the guess.

What is kept was read through the creating connection: committed rows,
because tidings publishes templates and policies only in transactions of
its own, never in the caller's.

Each tenant has its own bounded entries, so one tenant's many templates
cannot evict another's (DESIGN.md, invariant 11); the number of tenants
is bounded too.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tidings.domain.errors import PolicyUnreadable
from tidings.domain.policy_document import Policy, PolicyError, parse_policy
from tidings.templates.model import TemplateRevision

# Enough for every tenant a process creates for at once; one evicted costs
# one read at its next create.
MAX_TENANTS = 1024
# Per tenant: (name, channel) pairs and pinned revisions in use at once.
MAX_TEMPLATES = 64
# Per tenant: a create needs only the current version; a few more ride out
# a publish without parsing again.
MAX_POLICIES = 4

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class Candidates:
    """A template's revisions a create chooses among: the newest per locale
    of one (name, channel), or the one pinned revision.

    `newest` is the newest revision of the name when they were read (any
    locale or channel), which the insert checks is still the newest; None
    for a pinned revision, which nothing published later can replace.
    """

    revisions: tuple[TemplateRevision, ...]
    newest: int | None


@dataclass(frozen=True)
class Remembered:
    """The tenant's current policy as last seen (None: none published) and
    a template's candidates."""

    policy: Policy | None
    candidates: Candidates


TemplateKey = tuple[str, str, int | None]  # name, channel, pinned revision


@dataclass
class _Tenant:
    policy_known: bool = False
    policy_version: str | None = None
    policies: OrderedDict[str, Policy] = field(default_factory=OrderedDict)
    templates: OrderedDict[TemplateKey, Candidates] = field(default_factory=OrderedDict)


class IntakeCache:
    """Thread-safe: the API creates from a pool of threads."""

    def __init__(
        self,
        *,
        tenants: int = MAX_TENANTS,
        templates: int = MAX_TEMPLATES,
        policies: int = MAX_POLICIES,
    ) -> None:
        self._bounds = (tenants, templates, policies)
        self._tenants: OrderedDict[str, _Tenant] = OrderedDict()
        self._lock = threading.Lock()

    def recall(self, tenant: str, key: TemplateKey) -> Remembered | None:
        """The current policy and the candidates as last seen; None when
        either was never read (or was evicted)."""
        with self._lock:
            entry = self._tenants.get(tenant)
            if entry is None or not entry.policy_known:
                return None
            candidates = entry.templates.get(key)
            if candidates is None:
                return None
            self._tenants.move_to_end(tenant)
            entry.templates.move_to_end(key)
            version = entry.policy_version
            policy = None if version is None else entry.policies.get(version)
            if version is not None and policy is None:
                return None
            return Remembered(policy, candidates)

    def remember_policy(
        self, tenant: str, version: str | None, document: Mapping[str, Any] | None
    ) -> Policy | None:
        """The tenant's current policy as just read, kept as the guess; a
        version already parsed is not parsed again."""
        with self._lock:
            entry = self._entry(tenant)
            entry.policy_known, entry.policy_version = True, version
            if version is None:
                return None
            policy = entry.policies.get(version)
            if policy is not None:
                entry.policies.move_to_end(version)
                return policy
        assert document is not None  # a stored version always has its document
        try:
            parsed = parse_policy(document)  # outside the lock: the slow part
        except PolicyError as exc:
            # Stored around the publish checks (issue #39): this tenant's
            # requests answer 409 with the field, never 500, never the value.
            raise PolicyUnreadable(tenant, version, f"refused at {exc.field}") from None
        with self._lock:
            entry = self._entry(tenant)
            _bounded_put(entry.policies, version, parsed, self._bounds[2])
        return parsed

    def remember_template(self, tenant: str, key: TemplateKey, candidates: Candidates) -> None:
        if not candidates.revisions:
            return  # a template not (yet) published is read again next time
        with self._lock:
            _bounded_put(self._entry(tenant).templates, key, candidates, self._bounds[1])

    def _entry(self, tenant: str) -> _Tenant:
        entry = self._tenants.get(tenant)
        if entry is None:
            entry = _Tenant()
            _bounded_put(self._tenants, tenant, entry, self._bounds[0])
        else:
            self._tenants.move_to_end(tenant)
        return entry


def _bounded_put(entries: OrderedDict[K, V], key: K, value: V, bound: int) -> None:
    entries[key] = value
    entries.move_to_end(key)
    while len(entries) > bound:
        entries.popitem(last=False)
