"""The `tidings` command."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from tidings.cli.keys import keys_app
from tidings.cli.stop import bound_the_stop, stop_on_signals
from tidings.platform.settings import Settings
from tidings.platform.signal_wait import wait_for_signal

if TYPE_CHECKING:
    from tidings.client import Tidings

app = typer.Typer(
    help="Durable, auditable e-mail and SMS notifications on PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
)
templates_app = typer.Typer(help="Template revisions.", no_args_is_help=True)
policy_app = typer.Typer(help="Policy versions.", no_args_is_help=True)
app.add_typer(keys_app, name="keys")
app.add_typer(templates_app, name="templates")
app.add_typer(policy_app, name="policy")
console = Console()
errors = Console(stderr=True)
# A worker's stop drains for one lease; past it by this much, it is stuck.
STOP_OVERRUN_SECONDS = 10.0

DatabaseWait = Annotated[
    float | None,
    typer.Option(
        help="at start-up, give up (exit 1) if the database has not answered within this"
        " many seconds; default: keep retrying (TIDINGS_DATABASE_WAIT_SECONDS)"
    ),
]

LogFormat = Annotated[
    str,
    typer.Option(
        help="json (one redacted JSON object a line, for a log pipeline) or console"
        " (readable lines); TIDINGS_LOG_FORMAT"
    ),
]
LogLevel = Annotated[str, typer.Option(help="debug, info, warning or error (TIDINGS_LOG_LEVEL)")]


def _configure_logs(log_format: str | None, log_level: str | None) -> None:
    """The redacting structured logging, for every long-running command: each
    line carries the context bound where it happened (tenant, intent id,
    correlation id, attempt, provider), never a destination, body or token."""
    from tidings.platform.logging import configure_logging

    fmt = (log_format or os.environ.get("TIDINGS_LOG_FORMAT") or "json").lower()
    level = (log_level or os.environ.get("TIDINGS_LOG_LEVEL") or "info").upper()
    if fmt not in ("json", "console"):
        raise typer.BadParameter("use json or console", param_hint="--log-format")
    try:
        configure_logging(level, json=fmt == "json")
    except ValueError:
        raise typer.BadParameter(f"unknown level {level!r}", param_hint="--log-level") from None


def _tidings(tenant: str | None = None, url: str | None = None) -> Tidings:
    from tidings.client import Tidings

    return Tidings(url, tenant=tenant)


def _await_database(
    settings: Settings, max_wait: float | None, stop: threading.Event
) -> str | None:
    """The database URL once PostgreSQL answers and the schema is migrated.

    None when asked to stop first. Waiting here, before the pool opens,
    means a long-running process never needs restarting because it was
    started while the database was down.
    """
    from tidings.store.embedded import embedded_url
    from tidings.store.migrate import migrate as apply_migrations
    from tidings.store.wait import DatabaseUnavailable, WaitInterrupted, wait_for_database

    url = settings.database_url or embedded_url(settings.resolved_home())
    limit = max_wait if max_wait is not None else settings.database_wait_seconds
    try:
        wait_for_database(lambda: apply_migrations(url), dsn=url, max_wait=limit, sleep=stop.wait)
    except WaitInterrupted:
        return None
    except DatabaseUnavailable as exc:
        # Markup off: libpq messages contain brackets ("[Errno 111]").
        errors.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    return url


@app.command()
def migrate() -> None:
    """Apply pending schema migrations (safe to run twice, or from two places at once)."""
    with _tidings() as t:
        applied = t.migrate()
    console.print(f"applied: {', '.join(applied)}" if applied else "schema is up to date")


@app.command()
def worker(
    sms_concurrency: Annotated[int, typer.Option(help="parallel SMS sends")] = 8,
    email_concurrency: Annotated[int, typer.Option(help="parallel e-mail sends")] = 8,
    batch_size: Annotated[int, typer.Option(help="most intents claimed per transaction")] = 256,
    lease_seconds: Annotated[
        float | None, typer.Option(help="worker lease per claimed intent (TIDINGS_LEASE_SECONDS)")
    ] = None,
    metrics_port: Annotated[
        int | None, typer.Option(help="serve this worker's provider-call metrics here")
    ] = None,
    database_wait_seconds: DatabaseWait = None,
    log_format: LogFormat = "",
    log_level: LogLevel = "",
) -> None:
    """Claim due intents, send them, reconcile and sweep, until SIGTERM."""
    _configure_logs(log_format, log_level)
    from tidings.dispatch.minting import minters_from_env
    from tidings.dispatch.runner import Worker
    from tidings.dispatch.steps import WorkerConfig
    from tidings.providers.routing import adapters_from_settings

    stop = stop_on_signals()  # first: a SIGTERM during start-up is a clean stop too
    settings = Settings()
    config = WorkerConfig(
        batch_size=batch_size,
        urgent_share=settings.urgent_share,
        lease_seconds=lease_seconds or settings.lease_seconds,
        concurrency={"sms": sms_concurrency, "email": email_concurrency},
        not_received_after=settings.not_received_after_seconds,
        event_push_concurrency=settings.event_push_concurrency,
        event_push_deadline=settings.event_push_deadline_seconds,
    )
    url = _await_database(settings, database_wait_seconds, stop)
    if url is None:
        console.print("worker stopped before the database answered")
        return
    bound_the_stop(stop, config.lease_seconds + STOP_OVERRUN_SECONDS)
    with _tidings(url=url) as t:
        w = Worker(
            t.runtime,
            adapters_from_settings(settings),
            config=config,
            minters=minters_from_env(os.environ),
        )
        if metrics_port is not None:
            from tidings.observability.process_metrics import serve_process_metrics

            serve_process_metrics(metrics_port)
        console.print(f"worker {w.owner} running; channels: {', '.join(w.adapters)}")
        unfinished = w.run(stop)
    if not unfinished:
        console.print("worker stopped; in-flight sends recorded")
        return
    # Python would wait for those calls at exit. Their claims are durable
    # and leased: lease recovery settles them as after a crash, so waiting
    # gains nothing, and a supervisor's stop timeout would end in SIGKILL.
    console.print(f"worker stopped; {unfinished} unfinished provider calls left to lease recovery")
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@app.command()
def simulator(
    port: Annotated[int, typer.Option(help="port to listen on")] = 8099,
    host: str = "127.0.0.1",
    seed: int = 0,
    webhook_url: Annotated[str | None, typer.Option(help="where to POST signed receipts")] = None,
    profile: Annotated[
        str | None,
        typer.Option(
            help="the provider to play: ideal, twilio, aws_sms, sns, vonage, ses, sendgrid, "
            "postmark, infrai, or sms=NAME,email=NAME (TIDINGS_SIMULATOR_PROFILE)"
        ),
    ] = None,
) -> None:
    """Run the provider simulator (SMS and e-mail) as its own process."""
    from tidings.providers.simulator import run

    config: dict[str, Any] = {"seed": seed, "profile": profile or Settings().simulator_profile}
    if webhook_url:
        config["webhook_url"] = webhook_url
    # Signs with the secret `tidings serve` checks (TIDINGS_SIMULATOR_WEBHOOK_SECRET);
    # unset, its development default, which serve accepts on loopback only.
    secret = Settings().simulator_webhook_secret
    if secret is not None:
        config["webhook_secret"] = secret.get_secret_value()
    run(host, port, **config)


@app.command()
def serve(
    port: Annotated[int, typer.Option(help="port to listen on")] = 8000,
    host: str = "127.0.0.1",
    metrics_port: Annotated[
        int | None,
        typer.Option(
            help="serve Prometheus /metrics (every tenant's ledger numbers) on this port; "
            "never on the API port"
        ),
    ] = None,
    metrics_host: Annotated[
        str, typer.Option(help="address the metrics port listens on (keep it internal)")
    ] = "127.0.0.1",
    database_wait_seconds: DatabaseWait = None,
    log_format: LogFormat = "",
    log_level: LogLevel = "",
    workers: Annotated[
        int,
        typer.Option(min=1, max=64, help="API processes sharing the port (each with its own pool)"),
    ] = 1,
) -> None:
    """Serve the HTTP API (and the console at /console)."""
    _configure_logs(log_format, log_level)
    from tidings.api.serve import serve as run_api
    from tidings.providers.routing import adapters_from_settings, by_name

    settings = Settings()
    # A stop while waiting is clean; once serving, uvicorn's handling (and
    # what it re-raises at exit) applies exactly as before.
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        url = _await_database(settings, database_wait_seconds, stop_on_signals())
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if url is None:
        return
    if workers > 1:
        from tidings.api.serve import serve_processes

        with contextlib.ExitStack() as held:

            def metrics() -> None:
                from tidings.observability.metrics import serve_ledger_metrics

                if metrics_port is not None:
                    t = held.enter_context(_tidings(url=url))
                    serve_ledger_metrics(t.runtime, metrics_port, metrics_host)

            raise typer.Exit(serve_processes(host, port, workers, url, then=metrics))
    with _tidings(url=url) as t:
        if metrics_port is not None:
            from tidings.observability.metrics import serve_ledger_metrics

            serve_ledger_metrics(t.runtime, metrics_port, metrics_host)
        try:
            adapters = by_name(adapters_from_settings(settings, serving_host=host))
        except Exception:  # webhooks need adapters; the API itself does not
            adapters = {}
        run_api(host, port, t, adapters)


@app.command()
def up(
    port: Annotated[int, typer.Option(help="API and console port")] = 8000,
    simulator_port: Annotated[int, typer.Option(help="provider simulator port")] = 8099,
    metrics_port: Annotated[int, typer.Option(help="Prometheus /metrics port")] = 9464,
) -> None:
    """Everything at once: embedded database, API, console, worker, simulator."""
    from tidings.cli.devstack import DevStack

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
        console.print(f"development API key: {key}", soft_wrap=True)
        wait_for_signal(stop_on_signals())
    finally:
        stack.stop()
    console.print("stopped")


@app.command()
def demo() -> None:
    """The three source scenarios end to end, with a summary and a timeline."""
    from tidings.demo.run import run_demo

    raise typer.Exit(run_demo(console))


@app.command()
def docs(
    port: Annotated[int, typer.Option(help="port to serve the site on")] = 8001,
    host: str = "127.0.0.1",
) -> None:
    """Serve the documentation site with live reload (needs the `docs` extra).

    Runs `mkdocs serve` on the mkdocs.yml of this source tree; the reference
    pages are generated from the installed code as the site builds.
    """
    config = Path(__file__).resolve().parents[2] / "mkdocs.yml"
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


@app.command()
def timeline(intent: str, tenant: Annotated[str | None, typer.Option()] = None) -> None:
    """Print everything known about one intent, in order."""
    from tidings.cli.timeline import intent_summary, timeline_table

    with _tidings(tenant) as t:
        found = t.get(intent)
        entries = t.timeline(intent)
    console.print(intent_summary(found))
    console.print(timeline_table(entries))


@templates_app.command("validate")
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


@policy_app.command("publish")
def policy_publish(path: Path, tenant: Annotated[str | None, typer.Option()] = None) -> None:
    """Publish an immutable policy version from a JSON file."""
    from tidings.policies import document

    with _tidings(tenant) as t:
        version = t.publish_policy(document(path.read_text("utf-8")), actor="cli")
    console.print(f"published {version}")


@app.command()
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
        with _tidings(tenant) as t:
            raise typer.Exit(shadow_command(t, live, since, until, as_json))
    from tidings.replay import replay_command, shipped_fixtures

    raise typer.Exit(replay_command(path or shipped_fixtures(), as_json))


@app.command()
def purge() -> None:
    """Delete evidence past its retention, each kind on its own clock (docs/retention.md)."""
    from tidings.dispatch.retention import purge as run_purge

    with _tidings() as t:
        removed = run_purge(t.db, t.clock.now())
    months = removed.pop("months_dropped")
    console.print(", ".join(f"{k}: {v}" for k, v in removed.items()))
    for month in months:
        console.print(f"dropped whole: {month}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
