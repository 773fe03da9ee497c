"""What the `tidings` commands share: the terminal, the client, and the
start-up of a long-running command (its logs, its wait for the database)."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from tidings.platform.settings import Settings

if TYPE_CHECKING:
    from tidings.client import Tidings

console = Console()
errors = Console(stderr=True)

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


def configure_logs(log_format: str | None, log_level: str | None) -> None:
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


def open_tidings(tenant: str | None = None, url: str | None = None) -> Tidings:
    from tidings.client import Tidings

    # A one-shot command's server that does not answer is one line at once,
    # not a pool's retries; a service passes the url it already waited for.
    given = None if url else Settings().database_url
    if given:
        import psycopg

        psycopg.connect(given, connect_timeout=5).close()
    return Tidings(url, tenant=tenant)


def await_database(settings: Settings, max_wait: float | None, stop: threading.Event) -> str | None:
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
