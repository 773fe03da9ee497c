"""The claim lanes' signals, from rows at scrape time (docs/concepts/lanes.md).

Seed 003 names what shows whether urgent messages are getting through:
queue age per lane, retry age, tokens that expired before dispatch, and
suppressions by reason. Claim throughput and time are process-local
(process_metrics.py): only the worker that claims knows them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import psycopg
from prometheus_client.core import GaugeMetricFamily, Metric

from tidings.store import lanes

LANES = ("urgent", "bulk")
CHANNELS = ("sms", "email")

LANE_METRICS: tuple[str, ...] = (
    "tidings_lane_due_intents",
    "tidings_lane_oldest_due_seconds",
    "tidings_oldest_retry_due_seconds",
    "tidings_expired_unsent_intents",
    "tidings_suppression_list_entries",
)


def lane_families(
    conn: psycopg.Connection[Any], now: datetime, tenants: list[str]
) -> Iterator[Metric]:
    due = GaugeMetricFamily(
        "tidings_lane_due_intents",
        "Intents due now and not claimed, by lane: urgent (of no job) or bulk (of a job).",
        labels=["tenant", "channel", "lane"],
    )
    age = GaugeMetricFamily(
        "tidings_lane_oldest_due_seconds",
        "How long the lane's oldest due, unclaimed intent has been due (0: none). "
        "The urgent lane's should stay within seconds whatever the jobs do.",
        labels=["tenant", "channel", "lane"],
    )
    retry = GaugeMetricFamily(
        "tidings_oldest_retry_due_seconds",
        "How long the oldest due intent that was tried before has been due (0: none).",
        labels=["tenant", "channel"],
    )
    found = {(q.tenant_id, q.channel, q.lane): q for q in lanes.queues(conn, now)}
    every = {(t, c, lane) for t in tenants for c in CHANNELS for lane in LANES}
    oldest_retry: dict[tuple[str, str], float] = {}
    for key in sorted(every | set(found)):
        q = found.get(key)
        due.add_metric(list(key), q.due if q else 0)
        age.add_metric(list(key), _age(now, q.oldest_due_at) if q else 0.0)
        retried = _age(now, q.oldest_retry_due_at) if q else 0.0
        pair = (key[0], key[1])
        oldest_retry[pair] = max(oldest_retry.get(pair, 0.0), retried)
    for pair, seconds in sorted(oldest_retry.items()):
        retry.add_metric(list(pair), seconds)
    yield due
    yield age
    yield retry
    expired = GaugeMetricFamily(
        "tidings_expired_unsent_intents",
        "Intents that reached their deadline (a token's life, an offer's) with no call "
        "made, counted from rows.",
        labels=["tenant", "event_class"],
    )
    for row in lanes.expired_unsent(conn):
        expired.add_metric([row["tenant_id"], row["event_class"]], row["n"])
    yield expired
    listed = GaugeMetricFamily(
        "tidings_suppression_list_entries",
        "Destinations sends to are stopped for, by reason (hard_bounce, complaint, "
        "operator ...; opt_out for STOP and unsubscribes).",
        labels=["tenant", "channel", "reason"],
    )
    for row in lanes.suppression_lists(conn):
        listed.add_metric([row["tenant_id"], row["channel"], row["reason"]], row["n"])
    yield listed


def _age(now: datetime, then: datetime | None) -> float:
    return 0.0 if then is None else max(0.0, (now - then).total_seconds())
