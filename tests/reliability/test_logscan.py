"""The log scan finds a run's destination in any process's log, in each
form a line can carry it, and says where without repeating it."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness.reliability import logscan

REDACTED = '{"event": "provider call", "to": "<phone>", "attempt_key": "tdg:01a2:1"}\n'


def write(folder: Path, name: str, *lines: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines))
    return path


@pytest.mark.parametrize(
    ("leak", "kind"),
    [
        ("provider call to +14152070001\n", "phone number"),
        ("GET /Messages.json?To=%2B14153430002&PageSize=50\n", "phone number"),
        ("GET /Messages.json?To=%2b14153430002\n", "phone number"),
        ("bounce for member12@example.org\n", "e-mail address"),
        ("GET /messages?recipient=big7%40example.org\n", "e-mail address"),
        ("purged old-3@example.com\n", "e-mail address"),
    ],
)
def test_a_destination_in_a_workers_log_is_found_where_it_is(
    tmp_path: Path, leak: str, kind: str
) -> None:
    write(tmp_path, "worker-3.log", REDACTED, REDACTED, leak, REDACTED)
    found = logscan.check(tmp_path)
    assert found == [f"worker-3.log:3 holds a run's {kind} in the clear"]


def test_redacted_logs_and_the_providers_own_log_pass(tmp_path: Path) -> None:
    write(tmp_path, "api.log", REDACTED * 3, '{"ids": "14152070001 1733415000123"}\n')
    write(tmp_path, "simulator.log", "message to +14152070001 for member1@example.org\n")
    assert logscan.check(tmp_path) == []
    assert logscan.check(None) == [] and logscan.check(tmp_path / "absent") == []


def test_a_finding_never_repeats_the_destination(tmp_path: Path) -> None:
    write(tmp_path, "hosts/worker-1.log", "to +14152070001 and member9@example.org\n")
    (found,) = logscan.check(tmp_path)
    assert found.startswith("hosts/worker-1.log:1 ")
    assert "2070001" not in found and "member9" not in found


def test_a_destination_across_a_chunks_end_is_found_on_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logscan, "CHUNK", 64)
    padding = "x" * 50 + "\n"
    write(tmp_path, "worker-2.log", padding * 7, "y" * 88 + "+14152070001\n")
    assert logscan.check(tmp_path) == ["worker-2.log:8 holds a run's phone number in the clear"]
