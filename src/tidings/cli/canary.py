"""`tidings canary run`: one round of synthetic canaries now, through every
configured provider account to its official test destination
(dispatch/canary.py, docs/operations.md "Synthetic canaries").

Exit codes: 0 every canary succeeded (or none applies), 1 one failed,
2 no provider is configured.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from tidings.cli.common import console, open_tidings
from tidings.platform.settings import Settings
from tidings.providers.base import ProviderAdapter

canary_app = typer.Typer(
    help="Synthetic canaries through each provider account.", no_args_is_help=True
)


def configured_adapters(settings: Settings) -> dict[str, ProviderAdapter]:
    """The adapters a worker would send through (exit 2 when none is set)."""
    from tidings.cli.processes import configured_adapters as worker_adapters

    return worker_adapters(settings)


@canary_app.command("run")
def run(
    as_json: Annotated[bool, typer.Option("--json", help="Print the round as JSON")] = False,
) -> None:
    """Send one canary per provider account and channel now; store the
    answers, open or clear the canary alerts; exit 1 if any failed."""
    from tidings.dispatch.canary import run_round
    from tidings.observability.alerts import sync_alerts

    adapters = configured_adapters(Settings())
    with open_tidings() as t:
        now = t.runtime.clock.now()
        found = run_round(t.runtime.db, adapters, now)
        sync_alerts(t.runtime.db, now)  # the alert opens or clears at once
    rows = [
        {
            "account": r.account,
            "channel": r.channel,
            "target": r.target,
            "ok": r.ok,
            "code": r.code,
            "answer": r.answer,
        }
        for r in found.results
    ]
    if as_json:
        out = {"at": now.isoformat(), "results": rows, "skipped": found.skipped}
        typer.echo(json.dumps(out, indent=2))
    else:
        for row in rows:
            mark = "ok    " if row["ok"] else "FAILED"
            line = f"{mark} {row['account']} {row['channel']} ({row['target']}): {row['code']}"
            console.print(f"{line}: {row['answer']}", soft_wrap=True, markup=False)
        for account, why in found.skipped.items():
            console.print(f"skip   {account}: {why}", soft_wrap=True, markup=False)
    raise typer.Exit(1 if found.failed else 0)
