"""`python -m tidings.providers.simulator --port N`."""

from __future__ import annotations

import argparse
from typing import Any

from tidings.providers.simulator import DEFAULT_PORT, run


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tidings-simulator", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--webhook-url")
    parser.add_argument("--webhook-secret")
    parser.add_argument("--profile", help="the provider to play (profiles.py)")
    parser.add_argument("--log-level", default="warning")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    options = {"seed": args.seed, "webhook_url": args.webhook_url, "profile": args.profile}
    options["webhook_secret"] = args.webhook_secret
    config: dict[str, Any] = {k: v for k, v in options.items() if v is not None}
    run(args.host, args.port, log_level=args.log_level, **config)


if __name__ == "__main__":
    main()
