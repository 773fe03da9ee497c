"""Seed 002: "log the report id at each boundary". A job's JSON log lines
carry its job id and report id at freeze, preparation and each send."""

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

from .dispatch_helpers import simulator, worker
from .test_jobs import publish_report_templates, report_job


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
    w = worker(tidings, simulator(clock))
    assert w.dispatch_once() == 5
    logged = lines(stream)
    by_event: dict[str, list[dict[str, Any]]] = {}
    for line in logged:
        by_event.setdefault(line["event"], []).append(line)
    for event in ("job frozen", "job prepared", "provider call", "attempt recorded"):
        assert by_event.get(event), (event, sorted(by_event))
        for line in by_event[event]:
            assert line["job_id"] == str(job["id"]), line
            assert line["report_id"] == "8421@7", line
    assert len(by_event["provider call"]) == 5
    # No destination on any line, job context or not.
    assert not any("example.com" in json.dumps(line) for line in logged)
