"""The long-running commands: `tidings worker`, `simulator` and `serve`."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tidings.cli.common import (
    DatabaseWait,
    LogFormat,
    LogLevel,
    await_database,
    configure_logs,
    console,
    errors,
    open_tidings,
)
from tidings.cli.stop import bound_the_stop, stop_on_signals
from tidings.platform.settings import Settings
from tidings.providers.simulator.profiles import PROFILE_CHOICES
from tidings.store.embedded import release as release_embedded

if TYPE_CHECKING:
    from tidings.providers.base import ProviderAdapter

# A worker's stop drains for one lease; past it by this much, it is stuck.
STOP_OVERRUN_SECONDS = 10.0


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
    configure_logs(log_format, log_level)
    from tidings.dispatch.minting import minters_from_env
    from tidings.dispatch.runner import Worker
    from tidings.dispatch.steps import WorkerConfig

    settings = Settings()
    adapters = configured_adapters(settings)  # waits for nothing: before the signals
    stop = stop_on_signals()  # a SIGTERM during the rest of start-up is a clean stop too
    config = WorkerConfig(
        batch_size=batch_size,
        urgent_share=settings.urgent_share,
        deadline_horizon_seconds=settings.deadline_horizon_seconds,
        lease_seconds=lease_seconds or settings.lease_seconds,
        concurrency={"sms": sms_concurrency, "email": email_concurrency},
        not_received_after=settings.not_received_after_seconds,
        event_push_concurrency=settings.event_push_concurrency,
        event_push_deadline=settings.event_push_deadline_seconds,
    )
    url = await_database(settings, database_wait_seconds, stop)
    if url is None:
        console.print("worker stopped before the database answered")
        return
    bound_the_stop(stop, config.lease_seconds + STOP_OVERRUN_SECONDS)
    with open_tidings(url=url) as t:
        w = Worker(
            t.runtime,
            adapters,
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
    from tidings.platform import tracing

    tracing.flush()  # os._exit skips the exporter's own flush at exit
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    release_embedded()  # os._exit runs no exit handler
    os._exit(0)


def configured_adapters(settings: Settings) -> dict[str, ProviderAdapter]:
    """The worker's adapters, or one line saying which setting is missing
    (its name, never a value) and exit 2: a configuration mistake, found
    before waiting for the database."""
    from tidings.providers.errors import ProviderConfigError
    from tidings.providers.routing import adapters_from_settings

    try:
        return adapters_from_settings(settings)
    except ProviderConfigError as exc:
        errors.print(
            f"error: {exc} (docs/providers.md; `tidings up` starts a simulator for you)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(2) from None


def simulator(
    port: Annotated[int, typer.Option(help="port to listen on")] = 8099,
    host: str = "127.0.0.1",
    seed: int = 0,
    webhook_url: Annotated[
        str | None,
        typer.Option(
            help="where to POST signed receipts and inbound messages: the API's "
            "/v1/webhooks/simulator (TIDINGS_SIMULATOR_WEBHOOK_URL); unset, none are sent"
        ),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option(help=f"the provider to play: {PROFILE_CHOICES} (TIDINGS_SIMULATOR_PROFILE)"),
    ] = None,
) -> None:
    """Run the provider simulator (SMS and e-mail) as its own process."""
    from tidings.providers.simulator import run

    settings = Settings()
    # A simulator told no profile plays `ideal`; workers ask it which it plays.
    played = profile or settings.simulator_profile or "ideal"
    config: dict[str, Any] = {"seed": seed, "profile": played}
    webhook_url = webhook_url or settings.simulator_webhook_url
    if webhook_url:
        config["webhook_url"] = webhook_url
    # Signs with the secret `tidings serve` checks (TIDINGS_SIMULATOR_WEBHOOK_SECRET);
    # unset, its development default, which serve accepts on loopback only.
    secret = settings.simulator_webhook_secret
    if secret is not None:
        config["webhook_secret"] = secret.get_secret_value()
    run(host, port, **config)


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
    configure_logs(log_format, log_level)
    from tidings.api.serve import serve as run_api
    from tidings.providers.routing import webhook_adapters

    settings = Settings()
    # A stop while waiting is clean; once serving, uvicorn's handling
    # applies (api/serve.py makes the SIGTERM it re-raises at exit clean).
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    stop = stop_on_signals()
    try:
        url = await_database(settings, database_wait_seconds, stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if url is None or stop.is_set():  # a stop that came during the migrations, too
        return
    if workers > 1:
        from tidings.api.serve import serve_processes

        with contextlib.ExitStack() as held:

            def metrics() -> None:
                from tidings.observability.metrics import serve_ledger_metrics

                if metrics_port is not None:
                    t = held.enter_context(open_tidings(url=url))
                    serve_ledger_metrics(t.runtime, metrics_port, metrics_host)

            raise typer.Exit(serve_processes(host, port, workers, url, then=metrics))
    with open_tidings(url=url) as t:
        if metrics_port is not None:
            from tidings.observability.metrics import serve_ledger_metrics

            serve_ledger_metrics(t.runtime, metrics_port, metrics_host)
        run_api(host, port, t, webhook_adapters(settings, serving_host=host))
