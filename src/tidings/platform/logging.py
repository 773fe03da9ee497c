"""Structured, redacting logs.

* :func:`get_logger` returns a structlog logger whose pipeline always ends in
  redaction, whether or not :func:`configure_logging` was called and whatever
  the host application did to structlog's global configuration. Without
  :func:`configure_logging` (tidings used as a library) each event is rendered
  to a redacted JSON string and handed to the stdlib logger of that name, so
  the host's handlers decide where it goes.
* :func:`configure_logging` (the CLI, ``serve``, ``worker``) installs one
  handler on the root logger, so structlog events *and* stdlib records
  (uvicorn, psycopg, ...) become one JSON object per line with an ISO UTC
  ``timestamp``, ``level``, ``logger``, ``event``, every context variable
  bound with :func:`bind_context` (``correlation_id``, ``intent_id``,
  ``tenant_id``, ``template_revision``, ``channel``, ``provider_message_id``
  ...), and redaction applied last, right before rendering.
* Redaction (see :mod:`tidings.domain.redaction`): e-mail addresses and
  phone numbers in every string value (recursively, the event message and
  formatted tracebacks included) are replaced; values under sensitive keys
  (``body``, ``rendered``, ``token``, ``reset_link``, ``link``, ``password``,
  ``destination``, ``to``, ``phone``, ``email`` ...) become ``<redacted>``.

Logs go to stderr by default, never stdout (CLI output stays parseable).
When running uvicorn programmatically pass ``log_config=None`` so it keeps
the handlers installed here.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import IO, Any, Final

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from tidings.domain.redaction import is_drop_key, redact_value

CONTEXT_KEYS: Final[tuple[str, ...]] = (
    "correlation_id",
    "intent_id",
    "tenant_id",
    "job_id",
    "report_id",
    "attempt",
    "template_revision",
    "channel",
    "provider",
    "provider_message_id",
    "worker_id",
)
_STDLIB_LOGGERS_TO_ROUTE: Final[tuple[str, ...]] = (
    "uvicorn",
    "uvicorn.error",
    "uvicorn.access",
    "fastapi",
)
# Keys structlog itself manages: never dropped, still redacted as text.
_RESERVED: Final[frozenset[str]] = frozenset({"event", "level", "logger", "timestamp"})
# Left untouched so a later format_exc_info / StackInfoRenderer can use them;
# the text they produce ("exception", "stack") is redacted by the final pass.
_PASSTHROUGH: Final[frozenset[str]] = frozenset({"exc_info", "stack_info"})


class _State:
    formatter_installed: bool = False


def redact_event_dict(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """structlog processor: redact every value of the event dict (recursively).

    Must run last before the renderer (after exception formatting)."""
    out: dict[str, Any] = {}
    for key, value in event_dict.items():
        if key.startswith("_") or key in _PASSTHROUGH:  # e.g. _record, exc_info
            out[key] = value
        elif key not in _RESERVED and is_drop_key(key):
            out[key] = "<redacted>"
        else:
            out[key] = redact_value(value)
    return out


def _drop_duplicates(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    # uvicorn adds a colourised copy of the message as an extra; a record an
    # earlier handler formatted carries "message". Both duplicate "event".
    event_dict.pop("color_message", None)
    event_dict.pop("message", None)
    return event_dict


def _pre_chain() -> list[Processor]:
    """Processors run on every event before redaction and rendering."""
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def _final_chain(json: bool) -> list[Processor]:
    renderer: Processor = (
        structlog.processors.JSONRenderer(default=str)
        if json
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    return [
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
        _drop_duplicates,
        redact_event_dict,  # last before rendering
        renderer,
    ]


_LIBRARY_RENDER: Final[list[Processor]] = _final_chain(json=True)


def _hand_off(logger: WrappedLogger, method: str, event_dict: EventDict) -> Any:
    """Final processor of every tidings logger.

    With :func:`configure_logging` active, hand the event dict to the root
    handler's ``ProcessorFormatter`` (which redacts and renders); otherwise
    redact and render to a JSON string here, for whatever handlers the host
    application has."""
    if _State.formatter_installed:
        # Redact already here too: any other handler on the way (pytest's
        # capture, an error tracker) sees only the redacted dict.
        redacted = redact_event_dict(logger, method, event_dict)
        return structlog.stdlib.ProcessorFormatter.wrap_for_formatter(logger, method, redacted)
    result: Any = event_dict
    for proc in _LIBRARY_RENDER:
        result = proc(logger, method, result)
    return result


def _logger_processors() -> list[Processor]:
    return [
        structlog.stdlib.filter_by_level,
        *_pre_chain(),
        structlog.stdlib.PositionalArgumentsFormatter(),
        _hand_off,
    ]


_PROCESSORS: Final[list[Processor]] = _logger_processors()


class _TidingsHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Marker class so reconfiguration replaces only our own handler."""


def _level(level: str | int) -> int:
    if isinstance(level, int):
        return level
    value = logging.getLevelName(level.upper())
    if not isinstance(value, int):
        raise ValueError(f"unknown log level {level!r}")
    return value


def configure_logging(
    level: str | int = "INFO", json: bool = True, stream: IO[str] | None = None
) -> logging.Handler:
    """Route structlog and stdlib logging through one redacting handler.

    Idempotent: calling it again replaces the handler it installed before
    (other root handlers, e.g. pytest's, are left alone). ``stream`` defaults
    to ``sys.stderr``. Returns the installed handler."""
    handler = _TidingsHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*_pre_chain(), structlog.stdlib.ExtraAdder()],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                *_final_chain(json),
            ],
        )
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _TidingsHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(_level(level))
    for name in _STDLIB_LOGGERS_TO_ROUTE:
        routed = logging.getLogger(name)
        routed.handlers.clear()
        routed.propagate = True
    _State.formatter_installed = True
    # Code that calls structlog.get_logger() directly gets the same pipeline.
    structlog.configure(
        processors=_PROCESSORS,
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        context_class=dict,
        cache_logger_on_first_use=True,
    )
    return handler


def reset_logging() -> None:
    """Remove the handler :func:`configure_logging` installed (tests, embedding)."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _TidingsHandler)]:
        root.removeHandler(old)
    _State.formatter_installed = False


def get_logger(name: str | None = None, **initial_values: Any) -> structlog.stdlib.BoundLogger:
    """A structlog ``BoundLogger`` over the stdlib logger ``name`` whose
    pipeline always ends in redaction (see the module docstring)."""
    logger: structlog.stdlib.BoundLogger = structlog.wrap_logger(
        logging.getLogger(name or "tidings"),
        processors=_PROCESSORS,
        wrapper_class=structlog.stdlib.BoundLogger,
        context_class=dict,
        cache_logger_on_first_use=True,
        **initial_values,
    )
    return logger


def bind_context(**values: Any) -> None:
    """Bind values (correlation_id, intent_id, ...) to every log line of the
    current context (thread / asyncio task) until cleared."""
    structlog.contextvars.bind_contextvars(**values)


def unbind_context(*keys: str) -> None:
    structlog.contextvars.unbind_contextvars(*keys)


def clear_context() -> None:
    structlog.contextvars.clear_contextvars()


@contextmanager
def log_context(**values: Any) -> Iterator[None]:
    """Bind values for the duration of a ``with`` block, then restore."""
    # Reset by token, not structlog's `bound_contextvars`: that one copies
    # the whole context to save what it overrides, once per send and per
    # record on the dispatch path (docs/benchmarks.md, "Measurements behind
    # the code").
    tokens = structlog.contextvars.bind_contextvars(**values)
    try:
        yield
    finally:
        structlog.contextvars.reset_contextvars(**tokens)


def job_context(job_id: Any, report_id: str | None, report_revision: int | None) -> dict[str, Any]:
    """The job and report a line belongs to, where known (seed 002: "log the
    report id at each boundary"): bound at job freeze, preparation and each
    send of a job's intents, so one grep follows a report end to end. Absent
    keys stay absent rather than null, so a one-off send's lines do not grow."""
    values: dict[str, Any] = {}
    if job_id is not None:
        values["job_id"] = str(job_id)
    if report_id is not None:
        values["report_id"] = (
            report_id if report_revision is None else f"{report_id}@{report_revision}"
        )
    return values


def current_context() -> MutableMapping[str, Any]:
    return structlog.contextvars.get_contextvars()


__all__ = [
    "CONTEXT_KEYS",
    "bind_context",
    "clear_context",
    "configure_logging",
    "current_context",
    "get_logger",
    "job_context",
    "log_context",
    "redact_event_dict",
    "reset_logging",
    "unbind_context",
]
