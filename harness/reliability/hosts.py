"""`python -m harness.reliability --hosts`: the many-hosts run at full size.

The topology of tests/long/test_multi_host.py (two API hosts, three worker
hosts in network namespaces, one cut off and killed, one added) with a job
of `--recipients` (100,000 for docs/scaling.md) and, at the end, a burst
through each API host to measure it. Always on a private PostgreSQL on the
bridge, never the system server; needs root. Writes
harness/reliability/reports/hosts-<time>-<recipients>.json with every check
and figure, prints them, and exits 1 if a check failed.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from rich.console import Console

from harness.hosts.checks import problems
from harness.hosts.run import HostsConfig, run


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("many hosts (--hosts)")
    group.add_argument("--hosts", action="store_true", help="run the many-hosts topology instead")
    group.add_argument("--recipients", type=int, default=100_000, help="the bulk job's audience")
    group.add_argument("--stream-per-s", type=float, default=20.0, help="single intents a second")
    group.add_argument(
        "--api-burst-seconds", type=float, default=20.0, help="each API host's burst (0: none)"
    )
    group.add_argument("--fsync", action="store_true", help="the private server with fsync on")


def main(args: argparse.Namespace, console: Console) -> int:
    config = HostsConfig(
        recipients=args.recipients,
        stream_per_s=args.stream_per_s,
        api_burst_s=args.api_burst_seconds,
        final_timeout_s=max(240.0, args.recipients / 50),
        pg_settings={"fsync": "on"} if args.fsync else {},
        progress=lambda line: console.print(f"[dim]{time.strftime('%H:%M:%S')} {line}[/]"),
    )
    started = time.strftime("%Y%m%dT%H%M%S")
    root = Path(tempfile.mkdtemp(prefix="tidings-hosts-"))
    console.print(f"logs and the private cluster under {root}")
    result = run(root, config)
    found = problems(result)
    for name, problem in found.items():
        console.print(f"{'[red]FAIL' if problem else '[green]ok'}[/] {name} {problem}")
    console.print(json.dumps(result.figures, indent=2))
    console.print(f"seconds: {result.seconds}")
    report = {
        "command": "python -m harness.reliability --hosts " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()
            if k in ("recipients", "stream_per_s", "api_burst_seconds")
        ),
        "config": {k: v for k, v in asdict(config).items() if k != "progress"},
        "checks": found,
        "figures": result.figures,
        "seconds": result.seconds,
        "states": dict(result.states),
        "sent_by_host": {k: dict(v) for k, v in result.sent_by_host.items()},
        "lease_recoveries": result.lease_recoveries,
    }  # fmt: skip
    args.report_dir.mkdir(parents=True, exist_ok=True)
    path = args.report_dir / f"hosts-{started}-{args.recipients}.json"
    path.write_text(json.dumps(report, indent=2, default=str) + "\n", "utf-8")
    console.print(f"report: {path}")
    return 1 if any(found.values()) else 0
