"""Results out: `bench/results/<date>.json`, `<date>.md`, and a table on screen."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.context import Context
from bench.model import Measure
from bench.pinning import note as pinning_note
from bench.targets import evaluate, information, ratio

HEADERS = ("Scenario", "Measure", "Median", "Min", "Max", "Unit", "Ratio to baselines")


def number(value: float | None) -> str:
    if value is None or value != value:  # NaN
        return "–"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def ratios(ctx: Context, measure: Measure) -> str:
    parts = []
    for key in measure.compare:
        found = ratio(ctx.results, measure.key, key)
        if found is not None:
            parts.append(f"{found:.2f}x {key}")
    return "; ".join(parts)


def rows(ctx: Context) -> list[tuple[str, ...]]:
    table: list[tuple[str, ...]] = []
    for result in ctx.results.values():
        if result.skipped:
            table.append((result.title, result.skipped, "", "", "", "", ""))
        for m in result.measures:
            cells = (number(m.median), number(m.low), number(m.high), m.unit)
            table.append((result.title, m.label, *cells, ratios(ctx, m)))
    return table


def document(ctx: Context, seconds: float) -> dict[str, Any]:
    config = ctx.config
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "mode": config.mode,
        "repetitions": config.repetitions,
        "seconds_cap": config.seconds,
        "intents": config.intents,
        "wall_seconds": round(seconds, 1),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "postgres": ctx.server.version,
            "platform": platform.platform(),
            "load_average_1m": ctx.load,
            "pinning": pinning_note(),
        },
        "scenarios": {name: r.as_dict() for name, r in ctx.results.items()},
        "targets": evaluate(ctx.results),
        "information": information(ctx.results),
        "profile": ctx.profile,
    }


def markdown(ctx: Context, doc: dict[str, Any]) -> str:
    lines = [
        f"Run {doc['date']}, {doc['mode']} mode: median of {doc['repetitions']} repetitions, "
        f"each capped at {doc['seconds_cap']:g} s and {doc['intents']:,} intents; "
        f"{doc['machine']['cpus']} CPUs, {doc['machine']['postgres']}, "
        f"{doc['wall_seconds']:.0f} s in all; 1-minute load average at each scenario's "
        f"start: {', '.join(str(x) for x in ctx.load)}. {doc['machine']['pinning']}.",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows(ctx)]
    lines += ["", "| Target | Value | Status |", "|---|---|---|"]
    lines += [f"| {t['target']} | {number(t['value'])} | {t['status']} |" for t in doc["targets"]]
    lines += ["", "Earlier targets, as information (no verdict):", "",
              "| Earlier target | Value |", "|---|---|"]  # fmt: skip
    lines += [f"| {i['earlier_target']} | {number(i['value'])} |" for i in doc["information"]]
    notes = [f"- {r.title}: {n}" for r in ctx.results.values() for n in r.notes]
    if notes:
        lines += ["", "Notes:", "", *notes]
    if ctx.profile:
        lines += ["", _profile_lines(ctx.profile)]
    return "\n".join(lines) + "\n"


def _profile_lines(profile: dict[str, Any]) -> str:
    where = profile.get("file") or profile.get("note")
    head = f"Profile ({profile.get('profiler', 'none')}): {where}"
    if "intents" in profile:
        head += (
            f"; {profile['intents']:,} intents dispatched by one thread in "
            f"{profile['seconds']} s wall, {profile.get('cpu_seconds', '?')} s CPU"
        )
    spots = [
        f"{i}. `{s['function']}` ({s['where']}): {s['attributed_s']:.2f} s"
        for i, s in enumerate(profile.get("hot_spots", []), 1)
    ]
    about = (
        "Time attributed to each tidings function: its own code plus the library and "
        "PostgreSQL time of the queries it issues (tidings callees excluded)."
    )
    return "\n".join([head, "", about, "", *spots])


def show(ctx: Context, doc: dict[str, Any]) -> None:
    table = Table(title=f"tidings benchmarks ({doc['mode']})")
    for header in HEADERS:
        table.add_column(header, justify="right" if header in ("Median", "Min", "Max") else "left")
    for row in rows(ctx):
        table.add_row(*row)
    console = Console(width=160)
    console.print(table)
    for target in doc["targets"]:
        console.print(f"{target['status']:>12}  {target['target']}: {number(target['value'])}")
    console.print("Earlier targets, as information:")
    for item in doc["information"]:
        console.print(f"{'info':>12}  {item['earlier_target']}: {number(item['value'])}")
    console.print(doc["machine"]["pinning"])


def write(ctx: Context, seconds: float) -> Path:
    doc = document(ctx, seconds)
    folder: Path = ctx.config.results_dir
    folder.mkdir(parents=True, exist_ok=True)
    # A run of some scenarios (--only) is filed apart, so it never replaces
    # the day's run of them all: 2026-11-30-scale-full.json, say.
    parts = [time.strftime("%Y-%m-%d"), *ctx.config.only]
    if ctx.config.only and ctx.config.full:
        parts.append("full")
    stem = folder / "-".join(parts)
    stem.with_suffix(".json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    stem.with_suffix(".md").write_text(markdown(ctx, doc))
    show(ctx, doc)
    print(f"wrote {stem}.json and {stem}.md")
    return stem
