"""`tidings replay --from-shadow`: read the live outcomes, print the shadow report."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from tidings.client import Tidings
from tidings.client.shadow import live_outcomes, shadow_report
from tidings.domain.errors import InvalidInput
from tidings.domain.shadow_comparison import LiveOutcome


def read_live_file(text: str, name: str) -> list[LiveOutcome]:
    """A JSON array, or JSON lines (one object per line)."""
    stripped = text.strip()
    try:
        if stripped.startswith("["):
            items = json.loads(stripped)
        else:
            items = [json.loads(line) for line in stripped.splitlines() if line.strip()]
    except json.JSONDecodeError as e:
        raise InvalidInput(name, f"not JSON (line {e.lineno}): {e.msg}") from None
    return live_outcomes(items, name)


def shadow_command(
    t: Tidings, live: Path | None, since: str | None, until: str | None, as_json: bool
) -> int:
    """`tidings replay --from-shadow`: 0 no difference, 1 differences, 2 bad input."""
    try:
        outcomes = None if live is None else read_live_file(live.read_text("utf-8"), live.name)
        start, end = _moment("since", since), _moment("until", until)
        report = shadow_report(t.db, t.tenant, outcomes, start, end, t.clock.now())
    except (InvalidInput, OSError) as e:
        sys.stderr.write(f"{e}\n")
        return 2
    sys.stdout.write(json.dumps(report, indent=2) + "\n" if as_json else format_report(report))
    return 1 if report["differences"] else 0


def _moment(name: str, text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(name, f"not an ISO 8601 date-time: {text!r}") from None
    if moment.tzinfo is None:
        raise InvalidInput(name, "needs a UTC offset (e.g. Z or +00:00)")
    return moment


def format_report(report: Mapping[str, Any]) -> str:
    lines = [
        f"shadow decisions for {report['tenant']} from {report['since'] or 'the start'}"
        f" until {report['until'] or 'now'}: {report['shadow_decisions']}",
        "  would: " + _counts(report["by_action"]),
        "  codes: " + _counts(report["by_code"]),
    ]
    if not report["compared_with_live"]:
        lines.append("  no live outcomes given (--live FILE): nothing compared")
        return "\n".join(lines) + "\n"
    lines.append(f"  agreed with the live system: {report['agreed']}")
    lines.append(f"  differences: {report['differences']}")
    for action, outcomes in sorted(report["matrix"].items()):
        lines.append(f"    tidings {action}: live " + _counts(outcomes))
    for d in report["difference_examples"]:
        lines.append(
            f"  DIFF {d['idempotency_key']}: tidings {d['tidings']['action']}"
            f" ({d['tidings']['code']}), live {d['live']}"
        )
    if report["live_without_shadow_decision"]:
        lines.append(
            f"  live outcomes with no shadow decision: {report['live_without_shadow_decision']}"
        )
    return "\n".join(lines) + "\n"


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"
