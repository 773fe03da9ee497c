"""Run the benchmarks: `python -m bench [--quick | --full] [--only NAME] [--profile]`.

Also `--repetitions N` (at least 3), `--seconds S` (the time cap of one
repetition) and `--intents N` (the count cap of one dispatch repetition).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
import traceback

from bench import report
from bench.context import Context, RunConfig
from bench.db import Server
from bench.model import ScenarioResult
from bench.scenarios import ORDER, runner

QUICK_INTENTS, FULL_INTENTS = 20_000, 100_000
QUICK_SECONDS, FULL_SECONDS = 6.0, 60.0


def parse_args(argv: list[str] | None = None) -> RunConfig:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--quick",
        action="store_true",
        help="the default: N=20,000, 6 s per repetition, jobs of 10k and 100k",
    )
    mode.add_argument("--full", action="store_true", help="N=100,000 and the 1M-recipient job")
    parser.add_argument("--only", action="append", choices=ORDER, help="repeatable")
    parser.add_argument("--no-baselines", action="store_true", help="ratios will be missing")
    parser.add_argument("--repetitions", type=int, default=3, help="at least 3")
    parser.add_argument("--seconds", type=float, help="time cap of one repetition")
    parser.add_argument("--intents", type=int, help="count cap of one dispatch repetition")
    parser.add_argument("--profile", action="store_true", help="profile scenario 1")
    args = parser.parse_args(argv)
    if args.repetitions < 3:
        parser.error("--repetitions must be at least 3 (the report shows a median)")
    return RunConfig(
        full=args.full,
        repetitions=args.repetitions,
        seconds=args.seconds or (FULL_SECONDS if args.full else QUICK_SECONDS),
        intents=args.intents or (FULL_INTENTS if args.full else QUICK_INTENTS),
        profile=args.profile,
        only=tuple(args.only or ()),
        baselines=not args.no_baselines,
    )


def selected(config: RunConfig) -> list[str]:
    wanted = set(config.only or ORDER)
    if config.baselines:
        wanted.add("baselines")
    else:
        wanted.discard("baselines")
    return [name for name in ORDER if name in wanted]


def run_one(ctx: Context, name: str) -> ScenarioResult:
    print(f"== {name}")
    ctx.load.append(round(os.getloadavg()[0], 2))
    started = time.perf_counter()
    try:
        result = runner(name)(ctx)
    except Exception as exc:  # report the failure and go on with the others
        traceback.print_exc()
        result = ScenarioResult(name, name, skipped=f"failed: {exc!r}")
    result.seconds = time.perf_counter() - started
    print(f"   {result.seconds:.0f} s" + (f" ({result.skipped})" if result.skipped else ""))
    return result


def main(argv: list[str] | None = None) -> None:
    config = parse_args(argv)
    # A SIGTERM (a CI timeout, `timeout 600`) must still stop the embedded
    # server: turned into SystemExit, it runs the `finally` below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    logging.basicConfig(level=logging.ERROR)
    started = time.perf_counter()
    server = Server()
    ctx = Context(config, server)
    try:
        for name in selected(config):
            ctx.results[name] = run_one(ctx, name)
        if config.profile:
            from bench.profile import profile_dispatch

            ctx.profile = profile_dispatch(ctx)
    finally:
        server.close()
    report.write(ctx, time.perf_counter() - started)


if __name__ == "__main__":
    main()
