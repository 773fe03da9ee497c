"""`tidings rollout report`: a rollout step's counts, to reconcile before the
live cohort grows (docs/operations.md, "Rolling out").

Exit codes: 0 the step is settled (nothing waiting or in flight) with no
unknown outcome, 1 it is not yet, 2 bad input.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from tidings.cli.common import console, open_tidings

rollout_app = typer.Typer(
    help="Rolling out one region and purpose at a time.", no_args_is_help=True
)

_ORDER = ("decided", "shadowed", "sent", "delivered", "failed", "unknown", "in_flight")


@rollout_app.command("report")
def report(
    since: Annotated[str, typer.Option(help="The step's start: intents created at or after")],
    until: Annotated[str | None, typer.Option(help="Created before (ISO 8601)")] = None,
    channel: Annotated[str | None, typer.Option()] = None,
    country: Annotated[str | None, typer.Option()] = None,
    purpose: Annotated[str | None, typer.Option()] = None,
    event_class: Annotated[str | None, typer.Option()] = None,
    tenant: Annotated[str | None, typer.Option(help="The tenant (default: TIDINGS_TENANT)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON")] = False,
) -> None:
    """Count the scope's intents: decided, shadowed, sent, delivered, failed,
    unknown, in flight; exit 1 until the step is settled."""
    from tidings.cli.keys import parse_instant

    with open_tidings(tenant) as t:
        found = t.rollout_report(
            since=parse_instant(since),
            until=parse_instant(until) if until else None,
            channel=channel,
            country=country,
            purpose=purpose,
            event_class=event_class,
        )
    if as_json:
        typer.echo(json.dumps(found, indent=2))
    else:
        _print(found)
    raise typer.Exit(0 if found["settled"] and not found["counts"]["unknown"] else 1)


def _print(found: dict[str, Any]) -> None:
    scope = ", ".join(f"{k}={v}" for k, v in found["scope"].items() if v) or "everything"
    counts = found["counts"]
    lines = [
        f"rollout of {found['tenant']}: {scope}, since {found['since']}"
        f" until {found['until'] or 'now'}",
        f"  shadow mode: {'on' if found['shadow_mode'] else 'off'},"
        f" live cohort: {found['live_percent'] if found['live_percent'] is not None else '-'}%",
        f"  intents: {counts['intents']} (waiting {counts['waiting']})",
        *(f"  {name.replace('_', ' ')}: {counts[name]}" for name in _ORDER),
        f"  not sent (policy, deadline, cancel): {counts['not_sent']}",
        "  settled" if found["settled"] else "  not settled: intents still waiting or in flight",
    ]
    for line in lines:
        console.print(line, soft_wrap=True, markup=False)
