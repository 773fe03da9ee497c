"""The synthetic canaries' metrics, from `canary_results` at scrape time
(dispatch/canary.py). Apart from every member series: no `tenant` label,
since a canary is a provider account's, and nothing here is counted in
`tidings_intents` or any other member figure."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
from prometheus_client.core import GaugeMetricFamily, Metric

from tidings.store import canaries

CANARY_METRICS: tuple[str, ...] = (
    "tidings_canary_ok",
    "tidings_canary_last_run_timestamp_seconds",
)


def canary_families(conn: psycopg.Connection[Any]) -> Iterator[Metric]:
    ok = GaugeMetricFamily(
        "tidings_canary_ok",
        "1 when the newest synthetic canary through the provider account and channel "
        "succeeded, 0 when it failed (canary_failed alert); no sample before the first round.",
        labels=["provider", "channel", "target"],
    )
    last = GaugeMetricFamily(
        "tidings_canary_last_run_timestamp_seconds",
        "When the newest synthetic canary through the provider account and channel ran.",
        labels=["provider", "channel"],
    )
    for row in canaries.latest(conn):
        ok.add_metric([row["account"], row["channel"], row["target"]], 1.0 if row["ok"] else 0.0)
        last.add_metric([row["account"], row["channel"]], row["at"].timestamp())
    yield ok
    yield last
