"""The `tidings` command: its groups, and its commands in the order `--help` lists them."""

from __future__ import annotations

from typing import Annotated

import typer

from tidings.cli import development, operations, policies, processes, templates
from tidings.cli.canary import canary_app
from tidings.cli.common import errors
from tidings.cli.intents import intents_app
from tidings.cli.keys import keys_app
from tidings.cli.mistakes import DATABASE_MISTAKES, database_mistake
from tidings.cli.rollout import rollout_app
from tidings.cli.stop import exit_on_sigterm
from tidings.cli.suppressions import suppressions_app

app = typer.Typer(
    help="Durable, auditable e-mail and SMS notifications on PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
)
templates_app = typer.Typer(help="Template revisions.", no_args_is_help=True)
policy_app = typer.Typer(help="Policy versions.", no_args_is_help=True)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"tidings {version('tidings')}")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="print the version and exit"
        ),
    ] = False,
) -> None:
    """Durable, auditable e-mail and SMS notifications on PostgreSQL."""


app.add_typer(keys_app, name="keys")
app.add_typer(templates_app, name="templates")
app.add_typer(policy_app, name="policy")
# Issue #40: finding intents (cli/intents.py).
app.add_typer(intents_app, name="intents")
# Issue #37, item 5: suppressions reviewed and lifted (cli/suppressions.py).
app.add_typer(suppressions_app, name="suppressions")
# Issue #41, item 1: a rollout step's counts (cli/rollout.py).
app.add_typer(rollout_app, name="rollout")
# Issue #41, item 2: synthetic canaries by hand (cli/canary.py).
app.add_typer(canary_app, name="canary")

for command in (
    operations.migrate,
    processes.worker,
    processes.simulator,
    processes.serve,
    development.up,
    development.demo,
    development.docs,
    operations.timeline,
    operations.replay,
    operations.purge,
):
    app.command()(command)
templates_app.command("validate")(operations.templates_validate)
# Issue #40, point 6: a second tenant set up from the CLI (cli/templates.py,
# cli/policies.py).
templates_app.command("publish")(templates.publish)
templates_app.command("list")(templates.list_templates)
templates_app.command("show")(templates.show)
policy_app.command("publish")(operations.policy_publish)
policy_app.command("list")(policies.list_policies)
policy_app.command("show")(policies.show)


def main() -> None:
    exit_on_sigterm()
    try:
        app()
    except DATABASE_MISTAKES as exc:
        # A user's ordinary mistakes (no server, a wrong DATABASE_URL, a
        # database never migrated) are one line and what to do, not a trace.
        errors.print(database_mistake(exc), markup=False, highlight=False, soft_wrap=True)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
