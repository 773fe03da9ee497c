"""`tidings templates publish|list|show`: a tenant's templates from a shell,
one file at a time (`templates validate` checks a directory of them).

`--json` prints what GET /v1/templates answers (and, for `show`, one of its
items), so a script can use either.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from tidings.cli.common import console, errors, open_tidings

if TYPE_CHECKING:
    from tidings.store.templates import Published
    from tidings.templates.model import Problem, TemplateRevision

Tenant = Annotated[str | None, typer.Option(help="The tenant (default: TIDINGS_TENANT)")]
Json = Annotated[bool, typer.Option("--json", help="Print the API's JSON")]


def say(text: str) -> None:
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def fail(text: str, code: int = 1) -> NoReturn:
    """One line on stderr, then exit: 1 for a refusal, 2 for a usage mistake."""
    errors.print(f"error: {text}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def publish(
    path: Annotated[Path, typer.Argument(help="A template file (JSON)")],
    tenant: Tenant = None,
    actor: Annotated[str, typer.Option(help="Who publishes, kept with the revision")] = "cli",
) -> None:
    """Publish one template file as the tenant's next revision.

    The file is checked as POST /v1/templates checks a revision (and as
    `templates validate` checks it, for the providers configured here).
    Exit 1 when it is refused, 2 when it cannot be read.
    """
    from tidings.domain.errors import InvalidInput
    from tidings.store.templates import history

    draft, warnings = _checked_draft(path)
    with open_tidings(tenant) as t:
        with t.db.transaction() as conn:
            before = {p.revision.revision for p in history(conn, t.tenant, draft.name)}
        try:
            stored = t.publish_template(
                draft.name,
                channel=draft.channel,
                body=draft.body,
                locale=draft.locale,
                subject=draft.subject,
                html_body=draft.html_body,
                required_variables=draft.required_variables,
                dispatch_variables=draft.dispatch_variables,
                attachment_policy=draft.attachment_policy,
                provider_template_ids=draft.provider_template_ids,
                actor=actor,
            )
        except InvalidInput as exc:  # the library checks again: one line, should it refuse
            fail(str(exc))
    where = (
        f"({stored.channel}, {stored.locale}, content {stored.content_hash[:12]})"
        f" in tenant {t.tenant}"
    )
    if stored.revision in before:  # the library returns the latest, unchanged
        say(
            f"unchanged: {stored.name} revision {stored.revision} already has this content"
            f" {where}; nothing published"
        )
    else:
        say(f"published {stored.name} revision {stored.revision} {where}")
    _print_problems(path.name, warnings)


def _checked_draft(path: Path) -> tuple[TemplateRevision, list[Problem]]:
    """The file's revision once it passes the API's checks, and its warnings;
    on any error, every problem printed and exit 1."""
    from tidings.platform.settings import Settings
    from tidings.providers.errors import ProviderConfigError
    from tidings.providers.template_ids import required_template_ids
    from tidings.templates.files import revision_from_dict
    from tidings.templates.validate import validate_revision

    document = _read_json(path)
    settings = Settings()
    try:
        needs = required_template_ids(settings.simulator_url)
    except ProviderConfigError as exc:  # a setting's name, never its value
        fail(str(exc), 2)
    draft, problems = revision_from_dict(document)
    if draft is not None:
        needs_here = needs.get(draft.channel, ())
        problems += validate_revision(draft, needs_here, settings.render_limits())
    if draft is None or any(p.is_error for p in problems):
        _print_problems(path.name, problems)
        raise typer.Exit(1)
    return draft, problems


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:  # a user's typo: one line, exit 2
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        fail(f"cannot read {path}: {reason}; give a template JSON file", 2)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"{path.name} is not JSON: {exc}", 2)


def _print_problems(shown: str, problems: list[Problem]) -> None:
    """Errors first, then warnings: one line each, as `templates validate` words them."""
    for p in sorted(problems, key=lambda p: not p.is_error):
        where = f" {p.field}" if p.field else ""
        line = f"{p.severity}: {shown}: {p.code}{where}: {p.message}"
        (errors if p.is_error else console).print(
            line, markup=False, highlight=False, soft_wrap=True
        )


def list_templates(tenant: Tenant = None, as_json: Json = False) -> None:
    """The newest revision of each template name, channel and locale."""
    from tidings.store.templates import latest_published

    with open_tidings(tenant) as t, t.db.transaction() as conn:
        found = latest_published(conn, t.tenant)
    if as_json:
        _print_json(_listing([p.revision for p in found]))
        return
    if not found:
        say(f"no templates published in tenant {t.tenant}")
        return
    rows = [("name", "channel", "locale", "revision", "content", "published", "by")]
    rows += [
        (r.name, r.channel, r.locale, str(r.revision), r.content_hash[:12], _when(p.at), p.by)
        for p in found
        for r in [p.revision]
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:  # aligned, never wrapped: names are copied from here
        say("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def show(
    name: Annotated[str, typer.Argument(help="The template name")],
    channel: Annotated[str | None, typer.Option(help="sms or email")] = None,
    locale: Annotated[str | None, typer.Option(help="The locale (en, de-AT ...)")] = None,
    revision: Annotated[int | None, typer.Option(help="This revision, not the newest")] = None,
    tenant: Tenant = None,
    as_json: Json = False,
) -> None:
    """One revision: the newest of the name (of --channel and --locale), or --revision N."""
    from tidings.api.schemas.admin import TemplateOut
    from tidings.store.templates import history
    from tidings.templates.model import normalize_locale

    with open_tidings(tenant) as t, t.db.transaction() as conn:
        every = history(conn, t.tenant, name)
    if not every:
        fail(f"no template {name} in tenant {t.tenant}; see `tidings templates list`")
    wanted = normalize_locale(locale) if locale else None
    found = [
        p
        for p in every
        if channel in (None, p.revision.channel)
        and wanted in (None, p.revision.locale)
        and revision in (None, p.revision.revision)
    ]
    if not found:
        fail(_none_such(name, channel, wanted, revision, t.tenant))
    if as_json:
        _print_json(TemplateOut.of(found[0].revision).model_dump(mode="json"))
        return
    _print_revision(found[0])
    others = sorted({_kind(p) for p in every} - {_kind(found[0])})
    if others and revision is None:
        say(f"also: {', '.join(others)} (choose with --channel and --locale)")


def _kind(p: Published) -> str:
    return f"{p.revision.channel}/{p.revision.locale}"


def _none_such(
    name: str, channel: str | None, locale: str | None, revision: int | None, tenant: str
) -> str:
    what = f"{channel + ' ' if channel else ''}template {name}"
    if locale:
        what += f" in locale {locale}"
    if revision is not None:
        what = f"revision {revision} of {what.removeprefix('template ')}"
    return f"no {what} in tenant {tenant}; see `tidings templates show {name}`"


def _print_revision(p: Published) -> None:
    r = p.revision
    say(
        f"{r.name} revision {r.revision}  {r.channel}  {r.locale}  content {r.content_hash}"
        f"  published {_when(p.at)} by {p.by}"
    )
    fields = {
        "subject": r.subject,
        "required variables": ", ".join(r.required_variables) or "none",
        "dispatch variables": ", ".join(r.dispatch_variables),
        "attachments": r.attachment_policy,
        "provider template ids": ", ".join(
            f"{k}={v}" for k, v in sorted(r.provider_template_ids.items())
        ),
    }
    for label, value in fields.items():
        if value:
            say(f"{label}: {value}")
    for label, text in (("body", r.body), ("html body", r.html_body)):
        if text is not None:
            say(f"{label}:")
            say(text)


def _listing(revisions: list[TemplateRevision]) -> dict[str, Any]:
    from tidings.api.schemas.admin import TemplateList, TemplateOut

    return TemplateList(items=[TemplateOut.of(r) for r in revisions]).model_dump(mode="json")


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _print_json(document: dict[str, Any]) -> None:
    # Plain print: rich would wrap long lines and colour the output.
    print(json.dumps(document, indent=2))
