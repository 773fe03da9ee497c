"""The commands for trying tidings on one machine: `tidings up`, `demo` and `docs`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from tidings.cli.common import LogFormat, LogLevel, configure_logs, console, errors
from tidings.cli.stop import stop_on_signals
from tidings.platform.settings import Settings
from tidings.platform.signal_wait import wait_for_signal


def up(
    port: Annotated[int, typer.Option(help="API and console port")] = 8000,
    simulator_port: Annotated[int, typer.Option(help="provider simulator port")] = 8099,
    metrics_port: Annotated[int, typer.Option(help="Prometheus /metrics port")] = 9464,
    log_format: LogFormat = "",
    log_level: LogLevel = "",
) -> None:
    """Everything at once: embedded database, API, console, worker, simulator."""
    from tidings.cli.devstack import DevStack

    # Readable lines by default: a person is watching this terminal.
    configure_logs(log_format or os.environ.get("TIDINGS_LOG_FORMAT") or "console", log_level)

    # A development stack: event webhooks to a receiver on this machine are
    # the point (src/tidings/platform/outbound.py); set it to 0 to try the refusal.
    os.environ.setdefault("TIDINGS_ALLOW_PRIVATE_WEBHOOKS", "1")
    stack = DevStack(
        Settings(), api_port=port, simulator_port=simulator_port, metrics_port=metrics_port
    ).start()
    try:
        key = stack.dev_key()
        policy = stack.example_policy()
        console.print(f"API       {stack.api_url}  (OpenAPI at {stack.api_url}/docs)")
        console.print(f"console   {stack.api_url}/console")
        console.print(f"metrics   {stack.metrics_url}  (Prometheus; not on the API port)")
        console.print(f"simulator {stack.simulator_url}  (ledger at {stack.simulator_url}/_ledger)")
        console.print(f"database  embedded, in {stack.settings.resolved_home() / 'pgdata'}")
        console.print(
            f"policy    {policy}  (publish your own: tidings policy publish FILE,"
            " or POST /v1/policies)"
        )
        console.print("Ctrl-C stops everything; intents are durable and resume on the next start.")
        console.print("an admin key for this run; it expires in a day:")
        console.print(f"development API key: {key}", soft_wrap=True)
        wait_for_signal(stop_on_signals())
    finally:
        stack.stop()
    console.print("stopped")


def demo() -> None:
    """The three source scenarios end to end, with a summary and a timeline."""
    from tidings.demo.run import run_demo

    raise typer.Exit(run_demo(console))


def docs(
    port: Annotated[int, typer.Option(help="port to serve the site on")] = 8001,
    host: str = "127.0.0.1",
) -> None:
    """Serve the documentation site with live reload (needs the `docs` extra).

    Runs `mkdocs serve` on the mkdocs.yml of this source tree; the reference
    pages are generated from the installed code as the site builds.
    """
    config = Path(__file__).resolve().parents[3] / "mkdocs.yml"
    if not config.is_file():
        errors.print("error: no mkdocs.yml here; run this from a clone of the repository")
        raise typer.Exit(1)
    try:
        from mkdocs.__main__ import cli as mkdocs_cli
    except ImportError:
        errors.print("error: the docs extra is not installed: pip install -e '.[docs]'")
        raise typer.Exit(1) from None
    os.chdir(config.parent)  # the hook and docs_dir are relative to it
    mkdocs_cli.main(
        ["serve", "--config-file", str(config), "--dev-addr", f"{host}:{port}"],
        prog_name="mkdocs",
    )
