"""The template deploy gate for one revision.

:func:`validate_revision` lists every problem of one revision by running
:data:`CHECKS` in order (the way :mod:`tidings.domain.policy` runs its
rules); :func:`ensure_valid` raises :class:`TemplateValidationError` when any
of them is an error. Template files (``tidings templates validate DIR``) are
read and checked by :mod:`tidings.templates.files`.

Problem codes (errors unless noted): INVALID_NAME, INVALID_REVISION,
INVALID_CHANNEL, INVALID_LOCALE, BODY_REQUIRED, SYNTAX_ERROR,
UNSUPPORTED_TAG (include, import, extends), TEMPLATE_TOO_LARGE (constant
loops, text or arguments beyond the render limits; see
:mod:`tidings.templates.static_bounds`), SUBJECT_REQUIRED,
SUBJECT_NOT_ALLOWED, HTML_NOT_ALLOWED, INVALID_FIELD (an ``html_body`` that
is not a string), INVALID_VARIABLE_NAME, DUPLICATE_VARIABLE,
UNDECLARED_VARIABLE, UNUSED_VARIABLE (warning), INVALID_ATTACHMENT_POLICY,
ATTACHMENT_NOT_SUPPORTED (SMS cannot carry one),
INVALID_PROVIDER_TEMPLATE_ID, PROVIDER_MAPPING_MISSING.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from jinja2 import TemplateSyntaxError, meta, nodes

from tidings.templates.limits import DEFAULT_LIMITS, RenderLimits
from tidings.templates.model import (
    ATTACHMENT_POLICIES,
    CHANNELS,
    Problem,
    TemplateRevision,
    TemplateValidationError,
    normalize_locale,
)
from tidings.templates.sandbox import env_for_part
from tidings.templates.static_bounds import too_large

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]{0,127}$")
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LOCALE = re.compile(r"^[a-z]{2,3}(?:-[A-Z][a-z]{3})?(?:-(?:[A-Z]{2}|[0-9]{3}))?$")
_SELF_CONTAINED: Final = (nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)


def _problem(code: str, field_name: str, message: str, severity: str = "error") -> Problem:
    return Problem(code, field_name, message, "warning" if severity == "warning" else "error")


# ---------------------------------------------------------------- parsing


@dataclass(frozen=True)
class ParsedPart:
    """What parsing one part found: its problems (syntax, unsupported tags,
    provably too large) and the variables it uses (None: it did not parse)."""

    problems: tuple[Problem, ...]
    variables: frozenset[str] | None


def parse_part(part: str, source: str, limits: RenderLimits = DEFAULT_LIMITS) -> ParsedPart:
    env = env_for_part(part)
    try:
        ast = env.parse(source)
        # Compiling finds an unknown filter or test (TemplateAssertionError).
        used = frozenset(meta.find_undeclared_variables(ast)) - set(env.globals)
    except TemplateSyntaxError as exc:
        where = f"line {exc.lineno}: " if exc.lineno else ""
        message = f"{where}{exc.message or 'syntax error'}"
        return ParsedPart((_problem("SYNTAX_ERROR", part, message),), None)
    problems = [
        _problem(
            "UNSUPPORTED_TAG",
            part,
            f"line {node.lineno}: '{type(node).__name__.lower()}' is not supported; "
            "templates are self-contained",
        )
        for node in ast.find_all(_SELF_CONTAINED)
    ]
    problems.extend(too_large(part, ast, limits))
    return ParsedPart(tuple(problems), used)


def _sources(rev: TemplateRevision) -> dict[str, str]:
    """The parts there is something to parse in: a non-blank body or subject
    (whatever the channel), an e-mail's ``html_body``."""
    sources: dict[str, str] = {}
    if isinstance(rev.body, str) and rev.body.strip():
        sources["body"] = rev.body
    if isinstance(rev.subject, str) and rev.subject.strip():
        sources["subject"] = rev.subject
    if isinstance(rev.html_body, str) and rev.channel != "sms":
        sources["html_body"] = rev.html_body
    return sources


@dataclass(frozen=True)
class RevisionFacts:
    """What several checks need, worked out once per revision."""

    parsed: Mapping[str, ParsedPart]
    declared: frozenset[str]  # the well-formed names in required_variables
    required_providers: Collection[str]

    @classmethod
    def of(
        cls, rev: TemplateRevision, required_providers: Collection[str], limits: RenderLimits
    ) -> RevisionFacts:
        return cls(
            parsed={part: parse_part(part, src, limits) for part, src in _sources(rev).items()},
            declared=frozenset(
                v for v in rev.required_variables if isinstance(v, str) and _VARIABLE.match(v)
            ),
            required_providers=required_providers,
        )

    def problems_in(self, part: str) -> tuple[Problem, ...]:
        found = self.parsed.get(part)
        return found.problems if found is not None else ()

    @property
    def used(self) -> frozenset[str]:
        return frozenset().union(*(p.variables or () for p in self.parsed.values()))

    @property
    def parsed_all(self) -> bool:
        return all(p.variables is not None for p in self.parsed.values())


# ---------------------------------------------------------------- checks

Check = Callable[[TemplateRevision, RevisionFacts], Iterator[Problem]]


def _name(rev: TemplateRevision, facts: RevisionFacts) -> Iterator[Problem]:
    if not isinstance(rev.name, str) or not _NAME.match(rev.name):
        yield _problem(
            "INVALID_NAME",
            "name",
            "name must be 1-128 chars of letters, digits, '_', '.', '-', starting with a letter",
        )


def _revision_number(rev: TemplateRevision, facts: RevisionFacts) -> Iterator[Problem]:
    if not isinstance(rev.revision, int) or isinstance(rev.revision, bool) or rev.revision < 0:
        yield _problem("INVALID_REVISION", "revision", "revision must be an int >= 0")


def _channel(rev: TemplateRevision, facts: RevisionFacts) -> Iterator[Problem]:
    if rev.channel not in CHANNELS:
        yield _problem("INVALID_CHANNEL", "channel", "channel must be one of: email, sms")


def _locale(rev: TemplateRevision, facts: RevisionFacts) -> Iterator[Problem]:
    if not isinstance(rev.locale, str) or not _LOCALE.match(normalize_locale(rev.locale)):
        yield _problem(
            "INVALID_LOCALE", "locale", "locale must be a language tag like 'en', 'de-AT'"
        )


def _body(rev: TemplateRevision, facts: RevisionFacts) -> Iterator[Problem]:
    if not isinstance(rev.body, str) or not rev.body.strip():
        yield _problem("BODY_REQUIRED", "body", "body must be a non-empty string")
    yield from facts.problems_in("body")


def _subject(rev: TemplateRevision, facts: RevisionFacts) -> Iterator[Problem]:
    if rev.channel == "email":
        if rev.subject is None or not str(rev.subject).strip():
            yield _problem("SUBJECT_REQUIRED", "subject", "an e-mail template needs a subject")
    elif rev.channel == "sms" and rev.subject is not None:
        yield _problem("SUBJECT_NOT_ALLOWED", "subject", "an SMS template must not have a subject")
    yield from facts.problems_in("subject")


def _html_body(rev: TemplateRevision, facts: RevisionFacts) -> Iterator[Problem]:
    if rev.html_body is None:
        return
    if rev.channel == "sms":
        yield _problem("HTML_NOT_ALLOWED", "html_body", "an SMS template has no HTML body")
    elif not isinstance(rev.html_body, str):
        yield _problem("INVALID_FIELD", "html_body", "html_body must be a string")
    yield from facts.problems_in("html_body")


def _declared_variables(rev: TemplateRevision, facts: RevisionFacts) -> Iterator[Problem]:
    seen: set[str] = set()
    for var in rev.required_variables:
        if not isinstance(var, str) or not _VARIABLE.match(var):
            yield _problem(
                "INVALID_VARIABLE_NAME",
                "required_variables",
                f"{var!r} is not a valid variable name (letters, digits, '_')"
                if isinstance(var, str)
                else "variable names must be strings",
            )
        elif var in seen:
            yield _problem("DUPLICATE_VARIABLE", "required_variables", f"{var!r} is declared twice")
        else:
            seen.add(var)
    for var in rev.dispatch_variables:
        if var not in seen:
            yield _problem(
                "UNDECLARED_VARIABLE",
                "dispatch_variables",
                f"{var!r} is filled at dispatch but not declared in required_variables",
            )


def _undeclared_variables(rev: TemplateRevision, facts: RevisionFacts) -> Iterator[Problem]:
    for var in sorted(facts.used - facts.declared):
        yield _problem(
            "UNDECLARED_VARIABLE",
            "required_variables",
            f"{var!r} is used by the template but not declared in required_variables",
        )


def _unused_variables(rev: TemplateRevision, facts: RevisionFacts) -> Iterator[Problem]:
    if not facts.parsed_all:  # a part that does not parse may use any of them
        return
    for var in sorted(facts.declared - facts.used):
        yield _problem(
            "UNUSED_VARIABLE",
            "required_variables",
            f"{var!r} is declared but never used",
            severity="warning",
        )


def _attachment_policy(rev: TemplateRevision, facts: RevisionFacts) -> Iterator[Problem]:
    if rev.attachment_policy not in ATTACHMENT_POLICIES:
        yield _problem(
            "INVALID_ATTACHMENT_POLICY",
            "attachment_policy",
            "attachment_policy must be one of: none, optional, required",
        )
    elif rev.channel == "sms" and rev.attachment_policy != "none":
        yield _problem(
            "ATTACHMENT_NOT_SUPPORTED",
            "attachment_policy",
            "SMS cannot carry an attachment; use 'none'",
        )


def _provider_template_ids(rev: TemplateRevision, facts: RevisionFacts) -> Iterator[Problem]:
    for provider, template_id in sorted(rev.provider_template_ids.items()):
        if not str(template_id).strip():
            yield _problem(
                "INVALID_PROVIDER_TEMPLATE_ID",
                f"provider_template_ids.{provider}",
                f"provider template id for {provider!r} is empty",
            )


def _provider_mappings(rev: TemplateRevision, facts: RevisionFacts) -> Iterator[Problem]:
    for provider in sorted(set(facts.required_providers)):
        if not str(rev.provider_template_ids.get(provider, "")).strip():
            yield _problem(
                "PROVIDER_MAPPING_MISSING",
                f"provider_template_ids.{provider}",
                f"provider {provider!r} needs a provider-side template id for this revision",
            )


# The order is the order problems are reported in (tests and the CLI rely on it).
CHECKS: Final[tuple[Check, ...]] = (
    _name,
    _revision_number,
    _channel,
    _locale,
    _body,
    _subject,
    _html_body,
    _declared_variables,
    _undeclared_variables,
    _unused_variables,
    _attachment_policy,
    _provider_template_ids,
    _provider_mappings,
)


def validate_revision(
    rev: TemplateRevision,
    required_providers: Collection[str] = (),
    limits: RenderLimits = DEFAULT_LIMITS,
) -> list[Problem]:
    """Every problem of ``rev``, errors and warnings, in a stable order.

    ``required_providers`` names the providers that will send this revision
    *and* need a provider-side template id for it (the caller knows which
    adapters need mappings); each must have a non-empty entry in
    ``rev.provider_template_ids``, else PROVIDER_MAPPING_MISSING.
    ``limits`` are the render limits the workers apply (TEMPLATE_TOO_LARGE).
    """
    facts = RevisionFacts.of(rev, required_providers, limits)
    return [problem for check in CHECKS for problem in check(rev, facts)]


def errors_only(problems: Collection[Problem]) -> list[Problem]:
    return [p for p in problems if p.is_error]


def ensure_valid(rev: TemplateRevision, required_providers: Collection[str] = ()) -> list[Problem]:
    """Raise :class:`TemplateValidationError` if ``rev`` has any error-level
    problem; otherwise return its warnings."""
    problems = validate_revision(rev, required_providers)
    if errors_only(problems):
        raise TemplateValidationError(problems)
    return problems


__all__ = [
    "CHECKS",
    "ParsedPart",
    "RevisionFacts",
    "ensure_valid",
    "errors_only",
    "parse_part",
    "validate_revision",
]
