"""Template files: the format, loading, and ``tidings templates validate DIR``
(``tidings templates publish FILE`` publishes one).

:func:`validate_files` checks a directory of template files (the deploy
gate of :mod:`tidings.templates.validate` on each, plus what only a set of
files can get wrong); :func:`load_revision_file` loads one.

Template file format: one JSON object per file (``*.json``, searched
recursively, in path order)::

    {
      "name": "password_reset",          # required
      "channel": "email",                # required: "sms" | "email"
      "locale": "en",                    # optional, "en" when absent (as the API)
      "subject": "Reset your password",  # e-mail only; null/absent for SMS
      "body": "...",                     # required, plain text (Jinja2)
      "html_body": "...",                # optional, e-mail only, autoescaped
      "required_variables": ["reset_link"],
      "dispatch_variables": ["reset_link"],  # optional: filled at dispatch
      "attachment_policy": "none",       # "none" | "optional" | "required"
      "provider_template_ids": {"sendgrid": "d-..."},
      "revision": 3                      # optional; storage assigns it
    }

Problem codes of files (all errors), besides those of each revision:
INVALID_JSON, INVALID_FIELD, UNKNOWN_FIELD, MISSING_FIELD,
DUPLICATE_TEMPLATE (two files, same name/channel/locale), PATH_NOT_FOUND,
NO_TEMPLATES.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from tidings.templates.limits import DEFAULT_LIMITS, RenderLimits
from tidings.templates.model import (
    Problem,
    TemplateRevision,
    TemplateValidationError,
    normalize_locale,
)
from tidings.templates.validate import errors_only, validate_revision

EXAMPLES_DIR: Final[Path] = Path(__file__).resolve().parent / "examples"

FILE_FIELDS: Final[frozenset[str]] = frozenset(
    {
        "name",
        "channel",
        "locale",
        "subject",
        "body",
        "html_body",
        "required_variables",
        "dispatch_variables",
        "attachment_policy",
        "provider_template_ids",
        "revision",
    }
)
_REQUIRED_FILE_FIELDS: Final[tuple[str, ...]] = ("name", "channel", "body")
# The locale of a file that names none: the API's TemplateIn and the
# library's publish_template default to it too.
DEFAULT_LOCALE: Final[str] = "en"


def revision_from_dict(
    data: Any, *, tenant_id: str = "", revision: int | None = None
) -> tuple[TemplateRevision | None, list[Problem]]:
    """Build a revision from a template-file document. Returns the revision
    (None when the document is too broken to build one) and the structural
    problems found (unknown/missing/mistyped fields)."""
    problems: list[Problem] = []
    if not isinstance(data, dict):
        return None, [Problem("INVALID_FIELD", "", "a template file must hold a JSON object")]
    for key in sorted(set(data) - FILE_FIELDS):
        problems.append(Problem("UNKNOWN_FIELD", str(key), f"unknown field {key!r}"))
    for key in _REQUIRED_FILE_FIELDS:
        if key not in data:
            problems.append(Problem("MISSING_FIELD", key, f"field {key!r} is required"))

    def text(key: str, optional: bool = False) -> str | None:
        value = data.get(key)
        if value is None:
            return None if optional else ""
        if not isinstance(value, str):
            problems.append(Problem("INVALID_FIELD", key, f"{key!r} must be a string"))
            return None if optional else ""
        return value

    variables = data.get("required_variables", [])
    if not isinstance(variables, list):
        problems.append(Problem("INVALID_FIELD", "required_variables", "must be a list of strings"))
        variables = []
    at_dispatch = data.get("dispatch_variables", [])
    if not isinstance(at_dispatch, list) or not all(isinstance(v, str) for v in at_dispatch):
        problems.append(Problem("INVALID_FIELD", "dispatch_variables", "must be a list of strings"))
        at_dispatch = []
    mapping = data.get("provider_template_ids") or {}
    if not isinstance(mapping, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()
    ):
        problems.append(
            Problem(
                "INVALID_FIELD",
                "provider_template_ids",
                "must be an object mapping provider names to template id strings",
            )
        )
        mapping = {}
    number = data.get("revision", 0) if revision is None else revision
    if not isinstance(number, int) or isinstance(number, bool):
        problems.append(Problem("INVALID_FIELD", "revision", "'revision' must be an integer"))
        number = 0
    rev = TemplateRevision(
        tenant_id=tenant_id,
        name=text("name") or "",
        revision=number,
        channel=text("channel") or "",
        locale=DEFAULT_LOCALE if data.get("locale") is None else text("locale") or "",
        subject=text("subject", optional=True),
        body=text("body") or "",
        required_variables=tuple(variables),
        dispatch_variables=tuple(at_dispatch),
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
            [Problem("INVALID_JSON", "", f"{p.name}: {type(exc).__name__}: {exc}")]
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
    limits: RenderLimits = DEFAULT_LIMITS,
) -> ValidationReport:
    """Validate every ``*.json`` template file under ``path`` (or the single
    file ``path``). ``required_providers`` maps a channel to the providers
    that need a provider-side template id for that channel, e.g.
    ``{"sms": ["twilio"], "email": ["sendgrid"]}``. Two files declaring the
    same (name, channel, locale) are a DUPLICATE_TEMPLATE error."""
    root = Path(path)
    report = ValidationReport(root=str(root))
    if not root.exists():
        report.problems.append(Problem("PATH_NOT_FOUND", "", f"{root} does not exist"))
        return report
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*.json") if p.is_file())
    if not files:
        report.problems.append(Problem("NO_TEMPLATES", "", f"no *.json template files in {root}"))
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
                Problem("INVALID_JSON", "", f"cannot read JSON: {type(exc).__name__}: {exc}")
            )
            continue
        rev, problems = revision_from_dict(data)
        file_report.revision = rev
        file_report.problems.extend(problems)
        if rev is None:
            continue
        file_report.problems.extend(validate_revision(rev, needs.get(rev.channel, ()), limits))
        key = (rev.name, rev.channel, normalize_locale(rev.locale))
        if key in seen:
            file_report.problems.append(
                Problem(
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
    "load_revision_file",
    "revision_from_dict",
    "validate_files",
]
