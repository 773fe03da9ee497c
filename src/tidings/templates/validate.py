"""The template deploy gate.

:func:`validate_revision` lists every problem of one revision;
:func:`ensure_valid` raises :class:`TemplateValidationError` when any of them
is an error; :func:`validate_files` checks a directory of template files for
``tidings templates validate DIR``.

Template file format: one JSON object per file (``*.json``, searched
recursively, in path order)::

    {
      "name": "password_reset",          # required
      "channel": "email",                # required: "sms" | "email"
      "locale": "en",                    # required
      "subject": "Reset your password",  # e-mail only; null/absent for SMS
      "body": "...",                     # required, plain text (Jinja2)
      "html_body": "...",                # optional, e-mail only, autoescaped
      "required_variables": ["reset_link"],
      "attachment_policy": "none",       # "none" | "optional" | "required"
      "provider_template_ids": {"sendgrid": "d-..."},
      "revision": 3                      # optional; storage assigns it
    }

Problem codes (errors unless noted): INVALID_JSON, INVALID_FIELD,
UNKNOWN_FIELD, MISSING_FIELD, INVALID_NAME, INVALID_CHANNEL, INVALID_LOCALE,
INVALID_REVISION, BODY_REQUIRED, SYNTAX_ERROR, UNSUPPORTED_TAG (include,
import, extends), UNDECLARED_VARIABLE, UNUSED_VARIABLE (warning),
INVALID_VARIABLE_NAME, DUPLICATE_VARIABLE, SUBJECT_REQUIRED,
SUBJECT_NOT_ALLOWED, HTML_NOT_ALLOWED, INVALID_ATTACHMENT_POLICY,
ATTACHMENT_NOT_SUPPORTED (SMS cannot carry one), PROVIDER_MAPPING_MISSING,
INVALID_PROVIDER_TEMPLATE_ID, DUPLICATE_TEMPLATE (two files, same
name/channel/locale), PATH_NOT_FOUND, NO_TEMPLATES.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from jinja2 import TemplateSyntaxError, meta, nodes

from tidings.templates.model import (
    ATTACHMENT_POLICIES,
    CHANNELS,
    Problem,
    TemplateRevision,
    TemplateValidationError,
    normalize_locale,
)
from tidings.templates.render import env_for_part

EXAMPLES_DIR: Final[Path] = Path(__file__).resolve().parent / "examples"

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]{0,127}$")
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LOCALE = re.compile(r"^[a-z]{2,3}(?:-[A-Z][a-z]{3})?(?:-(?:[A-Z]{2}|[0-9]{3}))?$")

FILE_FIELDS: Final[frozenset[str]] = frozenset(
    {
        "name",
        "channel",
        "locale",
        "subject",
        "body",
        "html_body",
        "required_variables",
        "attachment_policy",
        "provider_template_ids",
        "revision",
    }
)
_REQUIRED_FILE_FIELDS: Final[tuple[str, ...]] = ("name", "channel", "locale", "body")


def _problem(code: str, field_name: str, message: str, severity: str = "error") -> Problem:
    return Problem(code, field_name, message, "warning" if severity == "warning" else "error")


def _check_syntax(part: str, source: str, problems: list[Problem]) -> set[str] | None:
    """Parse one part; report syntax errors and unsupported tags. Returns the
    variables the part uses, or None when it does not parse."""
    env = env_for_part(part)
    try:
        ast = env.parse(source)
    except TemplateSyntaxError as exc:
        where = f"line {exc.lineno}: " if exc.lineno else ""
        problems.append(_problem("SYNTAX_ERROR", part, f"{where}{exc.message or 'syntax error'}"))
        return None
    for node in ast.find_all((nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)):
        tag = type(node).__name__.lower()
        problems.append(
            _problem(
                "UNSUPPORTED_TAG",
                part,
                f"line {node.lineno}: '{tag}' is not supported; templates are self-contained",
            )
        )
    return set(meta.find_undeclared_variables(ast)) - set(env.globals)


def validate_revision(
    rev: TemplateRevision, required_providers: Collection[str] = ()
) -> list[Problem]:
    """Every problem of ``rev``, errors and warnings, in a stable order.

    ``required_providers`` names the providers that will send this revision
    *and* need a provider-side template id for it (the caller knows which
    adapters need mappings); each must have a non-empty entry in
    ``rev.provider_template_ids``, else PROVIDER_MAPPING_MISSING.
    """
    problems: list[Problem] = []

    if not isinstance(rev.name, str) or not _NAME.match(rev.name):
        problems.append(
            _problem(
                "INVALID_NAME",
                "name",
                "name must be 1-128 chars of letters, digits, '_', '.', '-', "
                "starting with a letter",
            )
        )
    if not isinstance(rev.revision, int) or isinstance(rev.revision, bool) or rev.revision < 0:
        problems.append(_problem("INVALID_REVISION", "revision", "revision must be an int >= 0"))
    channel_ok = rev.channel in CHANNELS
    if not channel_ok:
        problems.append(
            _problem("INVALID_CHANNEL", "channel", "channel must be one of: email, sms")
        )
    if not isinstance(rev.locale, str) or not _LOCALE.match(normalize_locale(rev.locale)):
        problems.append(
            _problem("INVALID_LOCALE", "locale", "locale must be a language tag like 'en', 'de-AT'")
        )

    # Content parts.
    used: set[str] = set()
    parsed_all = True
    if not isinstance(rev.body, str) or not rev.body.strip():
        problems.append(_problem("BODY_REQUIRED", "body", "body must be a non-empty string"))
    else:
        found = _check_syntax("body", rev.body, problems)
        parsed_all &= found is not None
        used |= found or set()

    if rev.channel == "email":
        if rev.subject is None or not str(rev.subject).strip():
            problems.append(
                _problem("SUBJECT_REQUIRED", "subject", "an e-mail template needs a subject")
            )
    elif rev.channel == "sms" and rev.subject is not None:
        problems.append(
            _problem("SUBJECT_NOT_ALLOWED", "subject", "an SMS template must not have a subject")
        )
    if isinstance(rev.subject, str) and rev.subject.strip():
        found = _check_syntax("subject", rev.subject, problems)
        parsed_all &= found is not None
        used |= found or set()

    if rev.html_body is not None:
        if rev.channel == "sms":
            problems.append(
                _problem("HTML_NOT_ALLOWED", "html_body", "an SMS template has no HTML body")
            )
        elif isinstance(rev.html_body, str):
            found = _check_syntax("html_body", rev.html_body, problems)
            parsed_all &= found is not None
            used |= found or set()
        else:
            problems.append(_problem("INVALID_FIELD", "html_body", "html_body must be a string"))

    # Declared variables.
    declared: list[str] = []
    seen: set[str] = set()
    for var in rev.required_variables:
        if not isinstance(var, str) or not _VARIABLE.match(var):
            problems.append(
                _problem(
                    "INVALID_VARIABLE_NAME",
                    "required_variables",
                    f"{var!r} is not a valid variable name (letters, digits, '_')"
                    if isinstance(var, str)
                    else "variable names must be strings",
                )
            )
            continue
        if var in seen:
            problems.append(
                _problem("DUPLICATE_VARIABLE", "required_variables", f"{var!r} is declared twice")
            )
            continue
        seen.add(var)
        declared.append(var)

    for var in sorted(used - seen):
        problems.append(
            _problem(
                "UNDECLARED_VARIABLE",
                "required_variables",
                f"{var!r} is used by the template but not declared in required_variables",
            )
        )
    if parsed_all:  # only meaningful when every part parsed
        for var in sorted(seen - used):
            problems.append(
                _problem(
                    "UNUSED_VARIABLE",
                    "required_variables",
                    f"{var!r} is declared but never used",
                    severity="warning",
                )
            )

    # Attachments.
    if rev.attachment_policy not in ATTACHMENT_POLICIES:
        problems.append(
            _problem(
                "INVALID_ATTACHMENT_POLICY",
                "attachment_policy",
                "attachment_policy must be one of: none, optional, required",
            )
        )
    elif rev.channel == "sms" and rev.attachment_policy != "none":
        problems.append(
            _problem(
                "ATTACHMENT_NOT_SUPPORTED",
                "attachment_policy",
                "SMS cannot carry an attachment; use 'none'",
            )
        )

    # Provider mappings.
    for provider, template_id in sorted(rev.provider_template_ids.items()):
        if not str(template_id).strip():
            problems.append(
                _problem(
                    "INVALID_PROVIDER_TEMPLATE_ID",
                    f"provider_template_ids.{provider}",
                    f"provider template id for {provider!r} is empty",
                )
            )
    for provider in sorted(set(required_providers)):
        if not str(rev.provider_template_ids.get(provider, "")).strip():
            problems.append(
                _problem(
                    "PROVIDER_MAPPING_MISSING",
                    f"provider_template_ids.{provider}",
                    f"provider {provider!r} needs a provider-side template id for this revision",
                )
            )
    return problems


def errors_only(problems: Collection[Problem]) -> list[Problem]:
    return [p for p in problems if p.is_error]


def ensure_valid(rev: TemplateRevision, required_providers: Collection[str] = ()) -> list[Problem]:
    """Raise :class:`TemplateValidationError` if ``rev`` has any error-level
    problem; otherwise return its warnings."""
    problems = validate_revision(rev, required_providers)
    if errors_only(problems):
        raise TemplateValidationError(problems)
    return problems


# ---------------------------------------------------------------- files


def revision_from_dict(
    data: Any, *, tenant_id: str = "", revision: int | None = None
) -> tuple[TemplateRevision | None, list[Problem]]:
    """Build a revision from a template-file document. Returns the revision
    (None when the document is too broken to build one) and the structural
    problems found (unknown/missing/mistyped fields)."""
    problems: list[Problem] = []
    if not isinstance(data, dict):
        return None, [_problem("INVALID_FIELD", "", "a template file must hold a JSON object")]
    for key in sorted(set(data) - FILE_FIELDS):
        problems.append(_problem("UNKNOWN_FIELD", str(key), f"unknown field {key!r}"))
    for key in _REQUIRED_FILE_FIELDS:
        if key not in data:
            problems.append(_problem("MISSING_FIELD", key, f"field {key!r} is required"))

    def text(key: str, optional: bool = False) -> str | None:
        value = data.get(key)
        if value is None:
            return None if optional else ""
        if not isinstance(value, str):
            problems.append(_problem("INVALID_FIELD", key, f"{key!r} must be a string"))
            return None if optional else ""
        return value

    variables = data.get("required_variables", [])
    if not isinstance(variables, list):
        problems.append(
            _problem("INVALID_FIELD", "required_variables", "must be a list of strings")
        )
        variables = []
    mapping = data.get("provider_template_ids") or {}
    if not isinstance(mapping, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()
    ):
        problems.append(
            _problem(
                "INVALID_FIELD",
                "provider_template_ids",
                "must be an object mapping provider names to template id strings",
            )
        )
        mapping = {}
    number = data.get("revision", 0) if revision is None else revision
    if not isinstance(number, int) or isinstance(number, bool):
        problems.append(_problem("INVALID_FIELD", "revision", "'revision' must be an integer"))
        number = 0
    rev = TemplateRevision(
        tenant_id=tenant_id,
        name=text("name") or "",
        revision=number,
        channel=text("channel") or "",
        locale=text("locale") or "",
        subject=text("subject", optional=True),
        body=text("body") or "",
        required_variables=tuple(variables),
        attachment_policy=text("attachment_policy", optional=True) or "none",
        provider_template_ids=mapping,
        html_body=text("html_body", optional=True),
    )
    return rev, problems


def load_revision_file(
    path: str | Path, *, tenant_id: str = "", revision: int | None = None
) -> TemplateRevision:
    """Load one template file; raise :class:`TemplateValidationError` on any
    error (structural or content)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TemplateValidationError(
            [_problem("INVALID_JSON", "", f"{p.name}: {type(exc).__name__}: {exc}")]
        ) from None
    rev, problems = revision_from_dict(data, tenant_id=tenant_id, revision=revision)
    if rev is not None:
        problems += validate_revision(rev)
    if rev is None or errors_only(problems):
        raise TemplateValidationError(problems)
    return rev


@dataclass
class FileReport:
    path: str
    revision: TemplateRevision | None
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not errors_only(self.problems)

    def to_dict(self) -> dict[str, Any]:
        rev = self.revision
        return {
            "path": self.path,
            "name": rev.name if rev else None,
            "channel": rev.channel if rev else None,
            "locale": rev.locale if rev else None,
            "content_hash": rev.content_hash if rev else None,
            "ok": self.ok,
            "problems": [p.to_dict() for p in self.problems],
        }


@dataclass
class ValidationReport:
    """Result of :func:`validate_files`. ``ok`` is False if any error exists
    (the CLI exits non-zero); warnings never fail it."""

    root: str
    files: list[FileReport] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # not tied to one file

    @property
    def error_count(self) -> int:
        return len(errors_only(self.problems)) + sum(
            len(errors_only(f.problems)) for f in self.files
        )

    @property
    def warning_count(self) -> int:
        every = self.problems + [p for f in self.files for p in f.problems]
        return sum(1 for p in every if not p.is_error)

    @property
    def ok(self) -> bool:
        return self.error_count == 0

    @property
    def revisions(self) -> list[TemplateRevision]:
        return [f.revision for f in self.files if f.revision is not None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "ok": self.ok,
            "errors": self.error_count,
            "warnings": self.warning_count,
            "problems": [p.to_dict() for p in self.problems],
            "files": [f.to_dict() for f in self.files],
        }

    def format_text(self) -> str:
        lines: list[str] = []
        for p in self.problems:
            lines.append(f"{self.root}: {p.severity} {p.code} {p.field}: {p.message}")
        for f in self.files:
            if not f.problems:
                lines.append(f"{f.path}: ok")
            for p in f.problems:
                where = f" {p.field}" if p.field else ""
                lines.append(f"{f.path}: {p.severity} {p.code}{where}: {p.message}")
        verdict = "ok" if self.ok else "FAILED"
        lines.append(
            f"{len(self.files)} template file(s), {self.error_count} error(s), "
            f"{self.warning_count} warning(s): {verdict}"
        )
        return "\n".join(lines)


def validate_files(
    path: str | Path,
    required_providers: Mapping[str, Collection[str]] | None = None,
) -> ValidationReport:
    """Validate every ``*.json`` template file under ``path`` (or the single
    file ``path``). ``required_providers`` maps a channel to the providers
    that need a provider-side template id for that channel, e.g.
    ``{"sms": ["twilio"], "email": ["sendgrid"]}``. Two files declaring the
    same (name, channel, locale) are a DUPLICATE_TEMPLATE error."""
    root = Path(path)
    report = ValidationReport(root=str(root))
    if not root.exists():
        report.problems.append(_problem("PATH_NOT_FOUND", "", f"{root} does not exist"))
        return report
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*.json") if p.is_file())
    if not files:
        report.problems.append(_problem("NO_TEMPLATES", "", f"no *.json template files in {root}"))
        return report
    needs = required_providers or {}
    seen: dict[tuple[str, str, str], str] = {}
    for file in files:
        shown = str(file.relative_to(root)) if file != root else file.name
        file_report = FileReport(path=shown, revision=None)
        report.files.append(file_report)
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            file_report.problems.append(
                _problem("INVALID_JSON", "", f"cannot read JSON: {type(exc).__name__}: {exc}")
            )
            continue
        rev, problems = revision_from_dict(data)
        file_report.revision = rev
        file_report.problems.extend(problems)
        if rev is None:
            continue
        file_report.problems.extend(validate_revision(rev, needs.get(rev.channel, ())))
        key = (rev.name, rev.channel, normalize_locale(rev.locale))
        if key in seen:
            file_report.problems.append(
                _problem(
                    "DUPLICATE_TEMPLATE",
                    "name",
                    f"{rev.name}/{rev.channel}/{key[2]} is also defined in {seen[key]}",
                )
            )
        else:
            seen[key] = shown
    return report


__all__ = [
    "EXAMPLES_DIR",
    "FileReport",
    "ValidationReport",
    "ensure_valid",
    "errors_only",
    "load_revision_file",
    "revision_from_dict",
    "validate_files",
    "validate_revision",
]
