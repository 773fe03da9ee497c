"""Seed 002: "log the report ID, immutable template revision, notification
intent ID, channel, and provider identifier at each boundary" (R002.10).
One intent's JSON log lines at its create, claim, provider call, answer,
record and receipt carry them; a job's carry its job id and report id
too, from freeze and preparation on. No line carries a destination or
the rendered body."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from tidings import ManualClock, Tidings
from tidings.platform.logging import clear_context, configure_logging, reset_logging

from .dispatch_helpers import offer, publish_offer_template, simulator, worker
from .test_jobs import publish_report_templates, report_job

# Every boundary of one intent, in order, after its creation.
BOUNDARIES = (
    "intent claimed",
    "provider call",
    "provider answered",
    "attempt recorded",
    "observation applied",
)


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    buf = io.StringIO()
    root = logging.getLogger()
    old_level = root.level
    configure_logging(level="INFO", stream=buf)
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


def by_event(logged: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for line in logged:
        found.setdefault(line["event"], []).append(line)
    return found


def test_one_intent_logs_its_ids_at_every_boundary(
    tidings: Tidings, clock: ManualClock, stream: io.StringIO
) -> None:
    publish_offer_template(tidings)
    w = worker(tidings, simulator(clock, receipt_delay_ms=1000))
    intent = offer(tidings)
    assert w.dispatch_once() == 1
    clock.advance(10)
    assert w.reconcile_once() == 1  # the receipt: delivered
    logged = lines(stream)
    mine = by_event([line for line in logged if line.get("intent_id") == str(intent.id)])
    for event in ("intent created", *BOUNDARIES):
        [line] = mine.get(event, [{}])
        assert line.get("channel") == "sms", (event, line)
        assert line.get("template_revision") == "waitlist_offer@1", (event, line)
        if event != "intent created":  # no provider is chosen before the claim
            assert line.get("provider") == "simulator", (event, line)
    [attempt] = tidings.get(intent.id).attempts
    for event in ("provider answered", "attempt recorded", "observation applied"):
        assert mine[event][0]["provider_message_id"] == attempt.provider_message_id
    assert mine["observation applied"][0]["effect"] == "intent_delivered"
    # Neither the destination nor the rendered body (nor its variables) on any line.
    text = "\n".join(json.dumps(line, ensure_ascii=False) for line in logged)
    for secret in ("4155550123", "spot opened", "Spin 7am"):
        assert secret not in text


def test_a_job_run_logs_its_job_and_report_at_each_boundary(
    tidings: Tidings, clock: ManualClock, tmp_path: Path, stream: io.StringIO
) -> None:
    publish_report_templates(tidings)
    path = tmp_path / "report.pdf"
    path.write_bytes(b"%PDF-1.4 report")
    tidings.register_report(
        "8421", 7, filename="q3.pdf", content_type="application/pdf", location=str(path)
    )
    job = report_job(tidings)
    tidings.prepare_jobs()
    w = worker(tidings, simulator(clock, receipt_delay_ms=1000))
    assert w.dispatch_once() == 5
    clock.advance(10)
    assert w.reconcile_once() == 5
    logged = lines(stream)
    found = by_event(logged)
    for event in ("job frozen", "job prepared", *BOUNDARIES):
        assert found.get(event), (event, sorted(found))
        for line in found[event]:
            assert line["job_id"] == str(job["id"]), line
            assert line["report_id"] == "8421@7", line
    for event in BOUNDARIES:
        assert len(found[event]) == 5, event
        for line in found[event]:
            assert line["template_revision"] == "report_ready@1", line
            assert line["channel"] == "email" and line["provider"] == "simulator", line
            assert line["intent_id"], line
    # No destination on any line, job context or not.
    assert not any("example.com" in json.dumps(line) for line in logged)
