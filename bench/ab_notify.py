"""Before and after, in one run: library `notify` of two installs, each a
long-lived process on its own fresh database, alternating in short bursts
(ABBA order), so both see the same machine minute by minute.

    python -m bench.ab_notify --before /path/to/old/.venv/bin/python \\
        --after .venv/bin/python [--threads 1] [--bursts 20] [--seconds 1.5]

Whole runs minutes apart move with the machine's load more than with the
code (docs/benchmarks.md, "The create's cache"); bursts side by side do
not. Each side creates 500 intents and analyzes before the first burst.
Uses the PostgreSQL at `BENCH_PG` (postgresql://postgres@127.0.0.1:5432).
Prints each pair and the medians; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

SIDE = Path(__file__).with_name("ab_notify_side.py")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ab_notify", description=__doc__)
    parser.add_argument("--before", required=True, help="the old install's python")
    parser.add_argument("--after", required=True, help="the new install's python")
    parser.add_argument("--threads", type=int, default=1, help="notify threads per side")
    parser.add_argument("--bursts", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=1.5, help="one burst")
    args = parser.parse_args(argv)
    sides = {
        name: subprocess.Popen(
            [python, str(SIDE), f"ab_notify_{name}", str(args.threads)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name, python in (("before", args.before), ("after", args.after))
    }
    for side in sides.values():
        if (side.stdout and side.stdout.readline().strip()) != "ready":
            sys.exit("a side did not start")
    rates: dict[str, list[float]] = {"before": [], "after": []}
    for n in range(args.bursts):
        order = ("before", "after") if n % 2 == 0 else ("after", "before")
        for name in order:
            rates[name].append(_burst(sides[name], args.seconds))
        print(f"{n:3d} before {rates['before'][-1]:7.0f}  after {rates['after'][-1]:7.0f}")
    for side in sides.values():
        if side.stdin:
            side.stdin.close()
        side.wait(60)
    ratios = [a / b for a, b in zip(rates["after"], rates["before"], strict=True) if b]
    faster = sum(r > 1 for r in ratios)
    print(
        f"notify, {args.threads} thread(s): before {statistics.median(rates['before']):.0f}/s, "
        f"after {statistics.median(rates['after']):.0f}/s, median ratio "
        f"{statistics.median(ratios):.2f} (after faster in {faster} of {len(ratios)})"
    )


def _burst(side: subprocess.Popen[str], seconds: float) -> float:
    assert side.stdin is not None and side.stdout is not None
    side.stdin.write(f"go {seconds}\n")
    side.stdin.flush()
    return float(side.stdout.readline())


if __name__ == "__main__":
    main()
