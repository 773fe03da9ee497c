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
    _print_soak(report, console)

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


def _print_soak(report: RunReport, console: Console) -> None:
    """What the soak adds: the big job, urgent latency beside it, PgBouncer's
    moves, and each process's peak memory."""
    p = report.processed
    big = p.get("big_job") or {}
    if big:
        urgent = big["urgent"]
        console.print(
            f"big job: {big['recipients']:,} recipients, made in {big['created_s']} s"
            f" {big['failure']}; its intents {big['intents_by_state']}"
        )
        console.print(
            f"urgent singles beside it: {urgent['created']} created,"
            f" {urgent['reached_provider']} reached the provider;"
            f" create to provider call p50 {urgent['p50_s']} s, p99 {urgent['p99_s']} s,"
            f" max {urgent['max_s']} s ({big['urgent_refused']} creates refused)"
        )
    if report.server.get("pgbouncer_moves") is not None:
        console.print(f"PgBouncer moved to a new primary {report.server['pgbouncer_moves']} times")
    peaks = p.get("peak_memory") or {}
    if peaks:
        memory = Table(title="Peak memory (resident, MiB)")
        memory.add_column("process")
        memory.add_column("peak")
        for role, mib in peaks["by_role_mib"].items():
            memory.add_row(role, str(mib))
        console.print(memory)
