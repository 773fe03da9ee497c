"""platform/tracing.py alone: the no-op while off, the closed attribute
list and its redaction, and turning tracing on (docs/tracing.md)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from uuid import UUID

import pytest
from pydantic import ValidationError

from tidings.platform import tracing
from tidings.platform.settings import Settings


@pytest.fixture(autouse=True)
def off_again() -> Iterator[None]:
    yield
    tracing.use(None)


def test_off_every_span_is_one_shared_no_op() -> None:
    assert not tracing.enabled()
    span = tracing.span("intent.create", intent_id="x")
    assert span is tracing.NO_SPAN and not span
    with span as inside:
        inside.set(code="X")
        inside.fail("X")
    tracing.batch_between("dispatch.claim", {}, "intent.claim", [{"intent_id": "x"}], 0, 1)


def test_only_listed_attributes_are_kept_and_strings_are_redacted() -> None:
    intent_id = UUID("01900000-0000-7000-8000-123456789012")
    kept = tracing.clean(
        {
            "intent_id": intent_id,
            "attempt": 2,
            "created": True,
            "correlation_id": "booking for reader@example.org at +14155550123",
            "job_id": None,
            "destination": "+14155550123",
            "body": "A spot opened",
            "token": "secret",
        }
    )
    assert kept == {
        "tidings.intent_id": str(intent_id),
        "tidings.attempt": 2,
        "tidings.created": True,
        "tidings.correlation_id": kept["tidings.correlation_id"],
    }
    assert "reader@example.org" not in kept["tidings.correlation_id"]
    assert "4155550123" not in kept["tidings.correlation_id"]


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="TIDINGS_TRACING"):
        tracing.configure("jaeger")
    with pytest.raises(ValidationError):
        Settings(tracing="jaeger")  # type: ignore[arg-type]


def test_off_needs_nothing_and_on_without_opentelemetry_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    tracing.configure("off")
    assert not tracing.enabled()
    with pytest.raises(RuntimeError, match=r"tidings\[tracing\]"):
        tracing.configure("global")
    assert not tracing.enabled()


def test_global_sends_spans_to_the_application_provider() -> None:
    tracing.configure("global")
    assert tracing.enabled()
    with tracing.span("intent.create", channel="sms") as span:
        assert span
        span.set(intent_id="x")


def test_the_setting_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().tracing == "off"
    monkeypatch.setenv("TIDINGS_TRACING", "otlp")
    assert Settings().tracing == "otlp"


def test_otlp_names_the_service_unless_the_environment_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    provider = tracing._otlp_provider("tidings")
    assert provider.resource.attributes["service.name"] == "tidings"
    provider.shutdown()
    monkeypatch.setenv("OTEL_SERVICE_NAME", "notify-prod")
    provider = tracing._otlp_provider("tidings")
    assert provider.resource.attributes["service.name"] == "notify-prod"
    provider.shutdown()


def test_otlp_exports_to_the_endpoint_the_environment_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    received: list[tuple[str, bytes]] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append((self.path, self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return None

    server = HTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setattr(tracing, "_provider", None)
    try:
        tracing.configure("otlp")
        with tracing.span("provider.call", attempt_key="k:1"):
            pass
        tracing.flush()
    finally:
        if tracing._provider is not None:
            tracing._provider.shutdown()
        server.shutdown()
    [(path, body)] = received
    assert path == "/v1/traces"
    assert b"provider.call" in body and b"tidings.attempt_key" in body
