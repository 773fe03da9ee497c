"""The one-shot commands on the ledger and on files: `tidings migrate`,
`timeline`, `templates validate`, `policy publish`, `replay` and `purge`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from tidings.cli.common import console, errors, open_tidings
from tidings.platform.settings import Settings


def migrate() -> None:
    """Apply pending schema migrations (safe to run twice, or from two places at once)."""
    with open_tidings() as t:
        applied = t.migrate()
    console.print(f"applied: {', '.join(applied)}" if applied else "schema is up to date")


# Piped output is not cut to a terminal's width: a line per entry, whole.
PIPED_WIDTH = 1_000


def timeline(
    intent: str,
    tenant: Annotated[str | None, typer.Option()] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the API's JSON: the intent and its timeline")
    ] = False,
) -> None:
    """Print everything known about one intent, in order."""
    from tidings.cli.timeline import intent_summary, timeline_table
    from tidings.domain.errors import NotFound

    with open_tidings(tenant) as t:
        try:
            found = t.get(intent)
        except NotFound:  # an id mistyped or from another tenant: say so, exit 1
            errors.print(
                f"error: no intent {intent} in this tenant; check the id (and --tenant)",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
            raise typer.Exit(1) from None
        entries = t.timeline(intent)
    if as_json:
        import json

        from tidings.api.schemas.intents import IntentOut, Timeline, TimelineEntryOut

        document = {
            "intent": IntentOut.of(found).model_dump(mode="json"),
            "timeline": Timeline(
                intent_id=found.id, entries=[TimelineEntryOut.of(e) for e in entries]
            ).model_dump(mode="json", by_alias=True),
        }
        print(json.dumps(document, indent=2))  # plain: rich would wrap and colour it
        return
    out = console if console.is_terminal else Console(width=PIPED_WIDTH)
    out.print(intent_summary(found))
    out.print(timeline_table(entries))


def templates_validate(path: Path) -> None:
    """The deploy gate: fail on any template revision that cannot be sent."""
    from tidings.providers.errors import ProviderConfigError
    from tidings.providers.template_ids import required_template_ids
    from tidings.templates.files import validate_files

    settings = Settings()
    # The providers configured here (TIDINGS_*_PROVIDER) that send by a
    # template of their own: each revision must name its id there.
    try:
        needs = required_template_ids(settings.simulator_url)
    except ProviderConfigError as exc:  # a setting's name, never its value
        console.print(f"error: {exc}")
        raise typer.Exit(2) from None
    report = validate_files(path, needs, limits=settings.render_limits())
    console.print(report.format_text())
    raise typer.Exit(0 if report.ok else 1)


def policy_publish(path: Path, tenant: Annotated[str | None, typer.Option()] = None) -> None:
    """Publish an immutable policy version from a JSON file."""
    from tidings.policies import document

    try:
        text = path.read_text("utf-8")
    except OSError as exc:  # a user's typo: one line, not a traceback
        errors.print(
            f"error: cannot read {path}: {exc.strerror or exc}; give a policy JSON file",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(2) from None
    with open_tidings(tenant) as t:
        version = t.publish_policy(document(text), actor="cli")
    console.print(f"published {version}")


def replay(
    path: Annotated[Path | None, typer.Argument(help="fixture file or directory")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    from_shadow: Annotated[
        bool,
        typer.Option(
            "--from-shadow",
            help="judge a shadow rollout: the tenant's shadow decisions in the database",
        ),
    ] = False,
    live: Annotated[
        Path | None,
        typer.Option(help="with --from-shadow: the live system's outcomes (JSON or JSON lines)"),
    ] = None,
    since: Annotated[str | None, typer.Option(help="with --from-shadow: ISO 8601 start")] = None,
    until: Annotated[str | None, typer.Option(help="with --from-shadow: ISO 8601 end")] = None,
    tenant: Annotated[str | None, typer.Option()] = None,
) -> None:
    """Shadow replay of decision fixtures: decisions only, no dispatch.

    Without a path, replays the fixtures shipped with tidings. Exits non-zero
    on any difference between expected and actual. With --from-shadow, reports
    the tenant's shadow-mode decisions instead, compared with --live when given
    (exit 1 on any difference, 2 on bad input).
    """
    if from_shadow:
        from tidings.cli.shadow import shadow_command

        if path is not None:
            raise typer.BadParameter("--from-shadow reads the database, not fixture files")
        with open_tidings(tenant) as t:
            raise typer.Exit(shadow_command(t, live, since, until, as_json))
    from tidings.replay import replay_command, shipped_fixtures

    raise typer.Exit(replay_command(path or shipped_fixtures(), as_json))


def purge() -> None:
    """Delete evidence past its retention, each kind on its own clock (docs/retention.md)."""
    from tidings.dispatch.retention import purge as run_purge

    with open_tidings() as t:
        removed = run_purge(t.db, t.clock.now())
    months = removed.pop("months_dropped")
    console.print(", ".join(f"{k}: {v}" for k, v in removed.items()))
    for month in months:
        console.print(f"dropped whole: {month}")
