"""Structured JSON logs: context, redaction, stdlib routing."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from tidings.platform.logging import (
    bind_context,
    clear_context,
    configure_logging,
    get_logger,
    log_context,
    reset_logging,
)

UUID = "550e8400-e29b-41d4-a716-446655440000"


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    buf = io.StringIO()
    root = logging.getLogger()
    old_level = root.level
    configure_logging(level="DEBUG", stream=buf)
    clear_context()
    try:
        yield buf
    finally:
        clear_context()
        reset_logging()
        structlog.reset_defaults()
        root.setLevel(old_level)


def lines(buf: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buf.getvalue().splitlines() if line.strip()]


def test_json_line_with_timestamp_level_logger(stream: io.StringIO) -> None:
    get_logger("tidings.test").info("worker started", batch_size=50)
    (line,) = lines(stream)
    assert line["event"] == "worker started"
    assert line["level"] == "info"
    assert line["logger"] == "tidings.test"
    assert line["batch_size"] == 50
    assert line["timestamp"].endswith("Z") and "T" in line["timestamp"]


def test_context_vars_appear_on_every_line(stream: io.StringIO) -> None:
    log = get_logger("tidings.dispatch")
    bind_context(correlation_id="corr-1", tenant_id="t1")
    with log_context(
        intent_id=UUID,
        template_revision=3,
        channel="sms",
        provider_message_id="SM0123456789abcdef0123456789abcdef",
    ):
        log.info("claimed")
        logging.getLogger("uvicorn.error").info("stdlib line")
        log.info("accepted", attempt=1)
    log.info("after")
    first, stdlib_line, second, after = lines(stream)
    for line in (first, stdlib_line, second):
        assert line["correlation_id"] == "corr-1"
        assert line["tenant_id"] == "t1"
        assert line["intent_id"] == UUID
        assert line["template_revision"] == 3
        assert line["channel"] == "sms"
        assert line["provider_message_id"] == "SM0123456789abcdef0123456789abcdef"
    assert second["attempt"] == 1
    assert after["correlation_id"] == "corr-1"
    assert "intent_id" not in after


def test_a_nested_context_restores_what_it_overrode(stream: io.StringIO) -> None:
    log = get_logger("tidings.dispatch")
    with log_context(channel="sms", intent_id="outer"):
        with log_context(intent_id="inner", attempt_key="k-1"):
            log.info("inner")
        log.info("outer")
    log.info("none")
    inner, outer, none = lines(stream)
    assert (inner["intent_id"], inner["attempt_key"], inner["channel"]) == ("inner", "k-1", "sms")
    assert (outer["intent_id"], outer["channel"]) == ("outer", "sms")
    assert "attempt_key" not in outer
    assert not {"intent_id", "channel", "attempt_key"} & none.keys()


def test_values_and_message_are_redacted(stream: io.StringIO) -> None:
    log = get_logger("tidings.test")
    log.info(
        "sending to bob@example.com and +15551234567",
        note="fallback (555) 123-4567 for alice@example.org",
        nested={"who": ["carol@example.net", {"deep": "030 1234567"}], "n": 7},
        idempotency_key="waitlist:771:1842:offer:1",
        attempt=2,
        intent_id=UUID,
        at="2025-05-01T12:30:45.123456+00:00",
    )
    raw = stream.getvalue()
    for secret in ("bob@example.com", "15551234567", "123-4567", "alice@", "carol@", "1234567"):
        assert secret not in raw
    (line,) = lines(stream)
    assert line["event"] == "sending to <email> and <phone>"
    assert line["note"] == "fallback <phone> for <email>"
    assert line["nested"] == {"who": ["<email>", {"deep": "<phone>"}], "n": 7}
    assert line["idempotency_key"] == "waitlist:771:1842:offer:1"
    assert line["attempt"] == 2
    assert line["intent_id"] == UUID
    assert line["at"] == "2025-05-01T12:30:45.123456+00:00"


@pytest.mark.parametrize(
    "key",
    [
        "body",
        "rendered",
        "token",
        "reset_link",
        "link",
        "password",
        "destination",
        "to",
        "phone",
        "email",
    ],
)
def test_sensitive_keys_are_dropped(stream: io.StringIO, key: str) -> None:
    get_logger("t").info("x", **{key: "s3cr3t-value"}, other={key: {"a": "s3cr3t-value"}})
    (line,) = lines(stream)
    assert line[key] == "<redacted>"
    assert line["other"][key] == "<redacted>"
    assert "s3cr3t" not in stream.getvalue()


def test_bound_and_context_values_are_redacted(stream: io.StringIO) -> None:
    bind_context(reset_link="https://x/r?t=SECRETTOKEN", contact="dave@example.com")
    get_logger("t").bind(to="+4915112345678").warning("bound")
    raw = stream.getvalue()
    assert "SECRETTOKEN" not in raw and "dave@" not in raw and "4915112345678" not in raw


def test_positional_args_are_redacted(stream: io.StringIO) -> None:
    get_logger("t").info("sent %s to %s", "sms", "+15551234567")
    assert lines(stream)[0]["event"] == "sent sms to <phone>"


def test_exceptions_are_formatted_and_redacted(stream: io.StringIO) -> None:
    log = get_logger("t")
    try:
        raise ValueError("cannot deliver to erin@example.com")
    except ValueError:
        log.exception("send failed for +15551234567")
    (line,) = lines(stream)
    assert line["level"] == "error"
    assert "ValueError" in line["exception"]
    assert "erin@example.com" not in line["exception"]
    assert "<email>" in line["exception"]
    assert line["event"] == "send failed for <phone>"


def test_stdlib_logging_is_routed_and_redacted(stream: io.StringIO) -> None:
    logging.getLogger("uvicorn.access").info(
        '%s - "%s %s HTTP/1.1" %d', "10.1.2.3:50000", "GET", "/v1/x?email=frank@example.com", 200
    )
    logging.getLogger("some.library").warning("user %s", "gina@example.com", extra={"phone": "x"})
    access, lib = lines(stream)
    assert access["logger"] == "uvicorn.access"
    # the URL path before an address is swallowed too (paths may hold tokens)
    assert access["event"] == '10.1.2.3:50000 - "GET <email> HTTP/1.1" 200'
    assert lib["event"] == "user <email>"
    assert lib["level"] == "warning"
    assert lib["phone"] == "<redacted>"
    assert "frank@" not in stream.getvalue() and "gina@" not in stream.getvalue()


def test_an_http_clients_request_line_loses_the_number_it_searched_for(
    stream: io.StringIO,
) -> None:
    """httpx's own INFO line, as it writes it for a provider's list search."""
    import httpx

    url = httpx.URL("http://sim/Messages.json", params={"To": "+14155550100", "PageSize": 100})
    logging.getLogger("httpx").info(
        'HTTP Request: %s %s "%s %d %s"', "GET", url, "HTTP/1.1", 200, "OK"
    )
    [line] = lines(stream)
    assert line["event"] == (
        'HTTP Request: GET http://sim/Messages.json?To=<phone>&PageSize=100 "HTTP/1.1 200 OK"'
    )


def test_stdlib_exception_is_redacted(stream: io.StringIO) -> None:
    try:
        raise RuntimeError("boom for hank@example.com")
    except RuntimeError:
        logging.getLogger("uvicorn.error").exception("unhandled")
    (line,) = lines(stream)
    assert "RuntimeError" in line["exception"]
    assert "hank@" not in line["exception"]


def test_level_filtering() -> None:
    buf = io.StringIO()
    try:
        configure_logging(level="WARNING", stream=buf)
        log = get_logger("t")
        log.info("hidden")
        log.debug("hidden")
        log.warning("shown")
        logging.getLogger("x").info("hidden")
        assert [line["event"] for line in lines(buf)] == ["shown"]
    finally:
        reset_logging()
        structlog.reset_defaults()
        logging.getLogger().setLevel(logging.WARNING)


def test_reconfigure_replaces_handler_not_stacks(stream: io.StringIO) -> None:
    second = io.StringIO()
    configure_logging(level="INFO", stream=second)
    get_logger("t").info("once")
    assert stream.getvalue() == ""
    assert len(lines(second)) == 1


def test_structlog_get_logger_also_redacts(stream: io.StringIO) -> None:
    structlog.get_logger("direct").info("hi", email="ivy@example.com", msg="to ivy@example.com")
    (line,) = lines(stream)
    assert line["email"] == "<redacted>" and line["msg"] == "to <email>"


def test_console_renderer_also_redacts() -> None:
    buf = io.StringIO()
    try:
        configure_logging(json=False, stream=buf)
        get_logger("t").info("to jack@example.com", phone="x")
        out = buf.getvalue()
        assert "jack@" not in out and "<email>" in out and "<redacted>" in out
    finally:
        reset_logging()
        structlog.reset_defaults()


def test_library_mode_without_configure_is_redacted(caplog: pytest.LogCaptureFixture) -> None:
    reset_logging()
    with caplog.at_level(logging.INFO, logger="tidings.lib"):
        get_logger("tidings.lib").info("to kate@example.com", to="+15551234567", attempt=1)
    (record,) = [r for r in caplog.records if r.name == "tidings.lib"]
    message = record.getMessage()
    assert "kate@" not in message and "15551234567" not in message
    doc = json.loads(message)
    assert doc["event"] == "to <email>" and doc["to"] == "<redacted>" and doc["attempt"] == 1
