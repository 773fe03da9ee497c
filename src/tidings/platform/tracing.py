"""Optional OpenTelemetry spans at an intent's boundaries (docs/tracing.md).

Off by default, and tidings runs without OpenTelemetry installed: nothing
here imports it until tracing is turned on. Off, :func:`span` returns one
shared no-op object after a check of a module-level name, so the hot path
pays a function call and nothing more.

On (``TIDINGS_TRACING=global`` or ``otlp``, :func:`configure`), each span
is named for its boundary (``intent.create``, ``intent.claim``,
``provider.call``, ``receipt.apply``) and carries ``tidings.intent_id``:
the create, the claim, the call and the receipt happen in different
processes and transactions, and the attribute is what ties them together
in a tracing backend. No trace context is stored with the intent.

Attributes come from a closed list (:data:`ATTRIBUTES`); a name not on it
is dropped, and every string goes through the log redaction, so a
destination, rendered body, token or key never reaches an exporter.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, Final
from uuid import UUID

from tidings.domain.intent import Intent
from tidings.domain.redaction import redact_text

PREFIX: Final = "tidings."
# Everything a span may say, as `tidings.<name>`; nothing else is recorded.
ATTRIBUTES: Final[frozenset[str]] = frozenset(
    {
        "intent_id",
        "tenant_id",
        "correlation_id",
        "channel",
        "template_revision",
        "policy_version",
        "job_id",
        "report_id",
        "created",
        "provider",
        "attempt",
        "attempt_key",
        "outcome",
        "code",
        "provider_message_id",
        "status",
        "source",
        "effect",
        "batch_size",
        "claimed",
    }
)
MODES: Final = ("off", "global", "otlp")

# The tracer while tracing is on; None: every span is the no-op.
_tracer: Any = None
_lock = threading.RLock()  # configure() installs through use()
_provider: Any = None  # the provider `otlp` installed (the SDK shuts it down at exit)


class NoSpan:
    """What :func:`span` returns while tracing is off: does nothing."""

    __slots__ = ()

    def __bool__(self) -> bool:  # `if span:` spares the attributes' cost while off
        return False

    def __enter__(self) -> NoSpan:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def set(self, **attributes: Any) -> None:
        return None

    def fail(self, code: str) -> None:
        return None


NO_SPAN: Final = NoSpan()


class Span(NoSpan):
    """One OpenTelemetry span, current for its `with` block."""

    __slots__ = ("_cm", "_name", "_span", "_start")

    def __init__(self, name: str, attributes: Mapping[str, Any]) -> None:
        self._name = name
        self._start = attributes
        self._cm: Any = None
        self._span: Any = None

    def __bool__(self) -> bool:
        return True

    def __enter__(self) -> Span:
        # Exceptions are not recorded as events: their messages are not
        # ours to vouch for. The status says the error's code or type.
        self._cm = _tracer.start_as_current_span(
            self._name,
            attributes=clean(self._start),
            record_exception=False,
            set_status_on_exception=False,
        )
        self._span = self._cm.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if kind is not None:
            self.fail(redact_text(str(getattr(error, "code", None) or kind.__name__)))
        self._cm.__exit__(kind, error, tb)

    def set(self, **attributes: Any) -> None:
        self._span.set_attributes(clean(attributes))

    def fail(self, code: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        self._span.set_status(Status(StatusCode.ERROR, code))


def enabled() -> bool:
    return _tracer is not None


def span(name: str, **attributes: Any) -> NoSpan:
    """A context manager for one span, current inside its block; `.set()`
    adds attributes found on the way, `.fail(code)` marks it an error."""
    if _tracer is None:
        return NO_SPAN
    return Span(name, attributes)


def batch_between(
    name: str,
    attributes: Mapping[str, Any],
    child: str,
    each: Iterable[Mapping[str, Any]],
    start_ns: int,
    end_ns: int,
) -> None:
    """A span over a batch's time, with one child span per attribute set
    over the same time (a batch's intents, claimed in one statement)."""
    if _tracer is None:
        return
    from opentelemetry import trace

    parent = _tracer.start_span(name, attributes=clean(attributes), start_time=start_ns)
    inside = trace.set_span_in_context(parent)
    for found in each:
        one = _tracer.start_span(child, inside, attributes=clean(found), start_time=start_ns)
        one.end(end_ns)
    parent.end(end_ns)


def intent_attributes(intent: Intent) -> dict[str, Any]:
    """What every span about one intent carries: the fields its boundary
    log lines carry (dispatch/boundaries.py), never a destination."""
    return {
        "intent_id": intent.id,
        "tenant_id": intent.tenant_id,
        "correlation_id": intent.correlation_id,
        "channel": intent.channel,
        "template_revision": f"{intent.template_name}@{intent.template_revision}",
        "policy_version": intent.policy_version,
        "job_id": intent.job_id,
        "report_id": intent.report_id,
    }


def clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes a span may carry: listed names only, None left out,
    strings redacted as in the logs, anything else not a number as text."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if value is None or key not in ATTRIBUTES:
            continue
        if isinstance(value, UUID):
            value = str(value)
        elif not isinstance(value, bool | int | float):
            value = redact_text(str(value))
        out[PREFIX + key] = value
    return out


def configure(mode: str, service: str = "tidings") -> None:
    """Turn tracing on as `TIDINGS_TRACING` says, once per process.

    ``off`` (the default) changes nothing; ``global`` sends spans to the
    tracer provider the application installed (OpenTelemetry's global one);
    ``otlp`` installs a provider of our own exporting over OTLP/HTTP, set up
    by the standard ``OTEL_EXPORTER_OTLP_*`` and ``OTEL_SERVICE_NAME``
    variables. Either needs the ``tracing`` extra.
    """
    global _tracer, _provider
    if mode not in MODES:
        raise ValueError(f"TIDINGS_TRACING: use one of {', '.join(MODES)}, not {mode!r}")
    if mode == "off" or _tracer is not None:
        return
    with _lock:
        if _tracer is not None:
            return
        try:
            from opentelemetry import trace
        except ImportError:
            raise RuntimeError(
                "TIDINGS_TRACING needs OpenTelemetry: pip install 'tidings[tracing]'"
            ) from None
        if mode == "otlp":
            _provider = _otlp_provider(service)
        use(_provider if mode == "otlp" else trace.get_tracer_provider())


def _otlp_provider(service: str) -> Any:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    named = {} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: service}
    provider = TracerProvider(resource=Resource.create(named))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


def use(provider: Any) -> None:
    """Send spans to this tracer provider (tests, embedding); None: off."""
    global _tracer
    with _lock:
        _tracer = None if provider is None else provider.get_tracer("tidings")


def flush() -> None:
    """Export what the `otlp` provider still holds (before a hard exit)."""
    if _provider is not None:
        _provider.force_flush()
