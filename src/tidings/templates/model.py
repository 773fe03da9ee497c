"""Immutable template revisions and the template error hierarchy.

A :class:`TemplateRevision` is the unit a job or intent records: once stored it
never changes, so an old job always renders what it was created with. The
``content_hash`` is computed from the *content* only (channel, locale, subject,
body, html body, declared variables, attachment policy and provider mappings),
never from the identity (tenant, name, revision number). Two revisions with the
same content therefore share a hash, which is what the render cache keys on and
what storage can use to refuse a no-op "new" revision.

Nothing in this module ever holds rendered text or variable values.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal

Channel = Literal["sms", "email"]
Severity = Literal["error", "warning"]

CHANNELS: Final[frozenset[str]] = frozenset({"sms", "email"})
ATTACHMENT_POLICIES: Final[frozenset[str]] = frozenset({"none", "optional", "required"})
DEFAULT_LOCALE: Final[str] = "en"


@dataclass(frozen=True)
class Problem:
    """One finding of the deploy gate.

    ``code`` is stable (tests, CLI output and the HTTP API rely on it); ``field``
    names the offending attribute (``body``, ``subject``, ``required_variables``,
    ``provider_template_ids.twilio`` ...); ``message`` is for humans and never
    contains variable values. ``severity`` is ``"error"`` (blocks deploy) or
    ``"warning"`` (reported, does not block).
    """

    code: str
    field: str
    message: str
    severity: Severity = "error"

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def to_dict(self) -> dict[str, str]:
        return {
            "code": self.code,
            "field": self.field,
            "message": self.message,
            "severity": self.severity,
        }


class TemplateError(Exception):
    """Root of every template failure."""


class TemplateValidationError(TemplateError):
    """A revision (or template file) failed the deploy gate.

    ``problems`` holds every finding, warnings included; at least one is an error.
    """

    def __init__(self, problems: Iterable[Problem], message: str | None = None) -> None:
        self.problems: list[Problem] = list(problems)
        if message is None:
            errors = [p for p in self.problems if p.is_error]
            codes = ", ".join(sorted({p.code for p in errors})) or "none"
            message = f"template validation failed: {len(errors)} error(s) ({codes})"
        super().__init__(message)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.is_error]


class RenderError(TemplateError):
    """Rendering failed.

    The message and attributes name the template, revision, part and - when it
    is an undefined variable - the variable *name*. They never contain variable
    values or rendered text (those may hold reset tokens or links).
    """

    def __init__(
        self,
        message: str,
        *,
        template: str | None = None,
        revision: int | None = None,
        part: str | None = None,
        variable: str | None = None,
        missing: tuple[str, ...] = (),
        lineno: int | None = None,
        reason: str = "render_failed",
    ) -> None:
        super().__init__(message)
        self.template = template
        self.revision = revision
        self.part = part
        self.variable = variable
        self.missing = missing
        self.lineno = lineno
        self.reason = reason


class RevisionNotFoundError(TemplateError):
    """No candidate revision matches the requested locale or its fallbacks."""


def _freeze_mapping(value: Mapping[str, str] | None) -> Mapping[str, str]:
    items = dict(value or {})
    return MappingProxyType({str(k): str(v) for k, v in sorted(items.items())})


@dataclass(frozen=True)
class TemplateRevision:
    """One immutable revision of a named template for one channel and locale.

    ``subject`` is for e-mail only. ``html_body`` is an optional HTML alternative
    for e-mail, rendered with autoescaping (``body`` is always the plain-text
    part and is rendered without escaping). ``provider_template_ids`` maps a
    provider name to that provider's id for this content (e.g. a SendGrid
    dynamic template id). Construction normalises types but does not reject bad
    values: :func:`tidings.templates.validate.validate_revision` reports them as
    problems so a deploy gate can list them all at once.
    """

    tenant_id: str
    name: str
    revision: int
    channel: str
    locale: str
    subject: str | None
    body: str
    required_variables: tuple[str, ...] = ()
    attachment_policy: str = "none"
    provider_template_ids: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({}), hash=False
    )
    html_body: str | None = None
    # Required variables a minter fills at dispatch (a reset link): exempt
    # from the create-time check that every other one was given.
    dispatch_variables: tuple[str, ...] = ()
    content_hash: str = field(init=False, default="")

    def __post_init__(self) -> None:
        object.__setattr__(self, "required_variables", tuple(self.required_variables))
        object.__setattr__(self, "dispatch_variables", tuple(self.dispatch_variables))
        object.__setattr__(
            self, "provider_template_ids", _freeze_mapping(self.provider_template_ids)
        )
        object.__setattr__(self, "content_hash", compute_content_hash(self))

    def canonical_content(self) -> dict[str, Any]:
        """The content the hash covers, in canonical form."""
        return canonical_content(self)


def canonical_content(rev: TemplateRevision) -> dict[str, Any]:
    # dispatch_variables only when declared, so every revision stored before
    # they existed keeps its hash.
    extra = {"dispatch_variables": sorted(rev.dispatch_variables)} if rev.dispatch_variables else {}
    return {
        **extra,
        "attachment_policy": rev.attachment_policy,
        "body": rev.body,
        "channel": rev.channel,
        "html_body": rev.html_body,
        "locale": normalize_locale(rev.locale),
        "provider_template_ids": dict(sorted(rev.provider_template_ids.items())),
        "required_variables": sorted(rev.required_variables),
        "subject": rev.subject,
    }


def compute_content_hash(rev: TemplateRevision) -> str:
    """sha256 (hex) of the canonical JSON of the revision's content."""
    doc = json.dumps(
        canonical_content(rev), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(doc.encode("utf-8")).hexdigest()


def normalize_locale(locale: str) -> str:
    """``de_at`` / ``DE-at`` -> ``de-AT``; ``EN`` -> ``en``; script subtags kept
    title-cased (``zh-hant-tw`` -> ``zh-Hant-TW``)."""
    parts = [p for p in locale.strip().replace("_", "-").split("-") if p]
    if not parts:
        return ""
    out = [parts[0].lower()]
    for part in parts[1:]:
        if len(part) == 4 and part.isalpha():
            out.append(part.title())
        elif (len(part) == 2 and part.isalpha()) or (
            len(part) == 3 and part.isascii() and part.isdigit()
        ):
            out.append(part.upper())
        else:
            out.append(part.lower())
    return "-".join(out)


def locale_language(locale: str) -> str:
    """The primary language subtag: ``de-AT`` -> ``de``."""
    return normalize_locale(locale).split("-", 1)[0]
