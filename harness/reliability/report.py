"""The run's report: a JSON file under harness/reliability/reports/ and a table."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .run import RunReport


def write(report: RunReport, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    stamp = report.started_at.replace(":", "").replace("-", "")[:15]
    path = directory / f"reliability-{stamp}-seed{report.config['seed']}.json"
    path.write_text(json.dumps(report.to_json(), indent=2, default=str) + "\n", "utf-8")
    return path


def print_table(report: RunReport, console: Console | None = None) -> None:
    console = console or Console()
    faults = Table(title="Faults injected", show_lines=False)
    for column in ("fault", "done", "skipped", "failed"):
        faults.add_column(column)
    for kind, outcomes in report.faults["by_kind"].items():
        faults.add_row(
            kind,
            str(outcomes.get("done", 0)),
            str(outcomes.get("skipped", 0)),
            str(outcomes.get("failed", 0)),
        )
    console.print(faults)
    for record in report.faults["records"]:
        if record["outcome"] != "done":
            console.print(f"  {record['kind']} {record['outcome']}: {record['reason']}")

    processed = Table(title="Processed")
    processed.add_column("what")
    processed.add_column("count")
    p = report.processed
    rows = [
        ("intents", p["intents"]),
        *((f"  {state}", n) for state, n in p["intents_by_state"].items()),
        ("attempts", p["attempts"]),
        *((f"  provider {outcome}", n) for outcome, n in p["provider_requests"].items()),
        ("observations", sum(p["observations_by_source"].values())),
        ("lease recoveries", p["lease_recoveries"]),
        ("cancels committed", p["cancels_committed"]),
        ("deadline expiries", p["deadline_expiries"]),
        ("bulk jobs", p["jobs"]),
        ("claims per second", p["claims_per_s"]),
        ("peak backlog (due, unclaimed)", p["backlog_peak"]),
        ("worker exits", report.faults["worker_exits"]),
    ]
    for what, n in rows:
        processed.add_row(what, str(n))
    console.print(processed)

    checks = Table(title="Invariants")
    checks.add_column("invariant")
    checks.add_column("violations")
    checks.add_column("first example")
    for name, result in report.invariants.items():
        example = result["examples"][0] if result["examples"] else ""
        checks.add_row(name, str(result["violations"]), example[:100])
    console.print(checks)
    seconds = ", ".join(f"{k} {v} s" for k, v in report.seconds.items())
    console.print(f"{seconds}; {report.violations} invariant violations")
