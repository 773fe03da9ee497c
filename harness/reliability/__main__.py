"""`python -m harness.reliability --minutes N`: the long reliability run.

`python -m harness.reliability --hosts --recipients 100000`: the many-hosts
run instead (harness/reliability/hosts.py), with its own report.

`python -m harness.reliability --soak 60`: an hour of every fault kind on a
three-member Patroni cluster, the primary killed and switched over among
them (harness/failover/), reached through PgBouncer in transaction mode,
with a job of 100,000 recipients (`--big-job`) beside urgent single intents,
two API hosts and three worker hosts in network namespaces, one cut off
now and then (`--no-namespaces`: all on loopback).

Writes harness/reliability/reports/reliability-<time>-seed<seed>.json, prints
a table, and exits 1 if any invariant was violated.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path

from rich.console import Console

from tidings.providers.simulator.profiles import PROFILE_CHOICES

from . import hosts, placement, report, soak
from .run import REPORTS, RunConfig, run


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m harness.reliability", description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the chaos phase")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--flood-size", type=int, default=500)
    parser.add_argument(
        "--profile",
        default="twilio",
        help=f"the provider the simulator plays: {PROFILE_CHOICES}",
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get("TIDINGS_TEST_DATABASE_URL"),
        help="a server to create the run's database on (default: $TIDINGS_TEST_DATABASE_URL, "
        "or a private embedded PostgreSQL when unset)",
    )
    parser.add_argument("--private", action="store_true", help="always use a private server")
    parser.add_argument("--report-dir", type=Path, default=REPORTS)
    parser.add_argument("--keep-database", action="store_true")
    parser.add_argument(
        "--pause", action="store_true", help="also SIGSTOP workers past their lease (opt-in)"
    )
    parser.add_argument(
        "--pgbouncer",
        action="store_true",
        help="API and workers through PgBouncer in transaction pooling mode",
    )
    parser.add_argument(
        "--patroni",
        action="store_true",
        help="a three-member Patroni cluster of the run's own, with failovers and switchovers",
    )
    parser.add_argument(
        "--soak",
        type=float,
        metavar="MINUTES",
        help="every fault kind at once on a Patroni cluster, failovers and switchovers "
        "among them, for MINUTES (--patroni --pgbouncer --minutes MINUTES, and the big job)",
    )
    parser.add_argument(
        "--big-job",
        type=int,
        metavar="RECIPIENTS",
        help="a job of this many recipients beside urgent single intents "
        f"(default with --soak: {soak.BIG_JOB_PER_HOUR:,} an hour, in proportion)",
    )
    parser.add_argument(
        "--profile-phases",
        type=int,
        metavar="N",
        help="N equal spans, each channel switched to its next wired provider between two "
        f"(default with --soak: {soak.PROFILE_PHASES}, every ten minutes in an hour)",
    )
    parser.add_argument(
        "--urgent-per-s", type=float, default=1.0, help="urgent single intents a second"
    )
    parser.add_argument(
        "--big-job-timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="how long the drain waits for the big job to finish (default 600)",
    )
    parser.add_argument(
        "--namespaces",
        action=argparse.BooleanOptionalAction,
        help="APIs and workers on hosts in network namespaces, with host cuts (needs root and "
        "--patroni; default with --soak)",
    )
    hosts.add_arguments(parser)
    return parser.parse_args(argv)


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt  # unwinds the run: processes stopped, database dropped


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # A run started in the background ignores SIGINT; either signal stops it cleanly.
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    # Our own pool meets dead connections after each restart, as designed.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    console = Console()
    if args.hosts:
        return hosts.main(args, console)
    if args.soak is not None:
        args.patroni, args.pgbouncer, args.minutes = True, True, args.soak
        if args.big_job is None:
            args.big_job = soak.big_job_size(args.soak)
        if args.profile_phases is None:
            args.profile_phases = soak.PROFILE_PHASES
        if args.namespaces is None:
            args.namespaces = True
    if args.namespaces:
        # A worker on each worker host.
        args.workers = max(args.workers, len(placement.WORKER_HOSTS))
    config = RunConfig(
        minutes=args.minutes,
        seed=args.seed,
        workers=args.workers,
        flood_size=args.flood_size,
        profile=args.profile,
        server_url=None if args.private else args.database_url,
        report_dir=args.report_dir,
        keep_database=args.keep_database,
        pauses=args.pause,
        pgbouncer=args.pgbouncer,
        patroni=args.patroni,
        big_job=args.big_job or 0,
        profile_phases=args.profile_phases or 0,
        urgent_per_s=args.urgent_per_s,
        big_job_timeout_s=args.big_job_timeout,
        soak=args.soak is not None,
        hosts=bool(args.namespaces),
        progress=lambda line: console.print(f"[dim]{line}[/]"),
    )
    result = run(config)
    report.print_table(result, console)
    console.print(f"report: {report.write(result, args.report_dir)}")
    return 1 if result.violations else 0


if __name__ == "__main__":
    sys.exit(main())
