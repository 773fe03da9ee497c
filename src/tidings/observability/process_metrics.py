"""Process-local metrics: what happens in memory and leaves no row.

Provider call latency and outcomes, calls withheld by the pre-call read,
and rate-limit waits: each process counts its own, and `metrics.py`
serves them beside the ledger's.

    record_provider_call("twilio", "sms", "accepted", 0.21)
    record_rate_limit_wait("recipient", 30.0)
"""

from __future__ import annotations

from collections.abc import Iterator

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client import start_http_server as _start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tidings.providers.outcomes import SendResult
from tidings.store.primary import WATCH

PROCESS_METRICS: tuple[str, ...] = (
    "tidings_provider_calls_total",
    "tidings_provider_call_seconds",
    "tidings_rate_limit_waits_total",
    "tidings_rate_limit_wait_seconds",
    "tidings_claims_total",
    "tidings_claim_seconds",
    "tidings_claimed_intents_total",
    "tidings_database_waiting_for_primary",
    "tidings_database_primary_waits_total",
    "tidings_database_primary_wait_seconds_total",
)

PROCESS_REGISTRY = CollectorRegistry()
_PROVIDER_CALLS = Counter(
    "tidings_provider_calls",
    "Provider send calls made by this process, by outcome "
    "(accepted, retryable, rejected, indeterminate, error).",
    ["provider", "channel", "outcome"],
    registry=PROCESS_REGISTRY,
)
_PROVIDER_CALL_SECONDS = Histogram(
    "tidings_provider_call_seconds",
    "Wall time of provider send calls made by this process.",
    ["provider", "channel"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
    registry=PROCESS_REGISTRY,
)
_CALLS_WITHHELD = Counter(
    "tidings_provider_calls_withheld",
    "Claimed sends this process did not make: the read right before the call found "
    "the intent canceled, expired or moved (withdrawn), past its deadline (expired), "
    "under a kill switch (killed), or its destination opted out or suppressed since "
    "the claim (stopped).",
    ["channel", "reason"],
    registry=PROCESS_REGISTRY,
)
_RATE_LIMIT_WAITS = Counter(
    "tidings_rate_limit_waits",
    "Times this process deferred an intent because a rate allowance was used up.",
    ["scope"],
    registry=PROCESS_REGISTRY,
)
_RATE_LIMIT_WAIT_SECONDS = Histogram(
    "tidings_rate_limit_wait_seconds",
    "How far a rate-limit deferral pushed the intent's next eligible time.",
    ["scope"],
    buckets=(1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 21600.0),
    registry=PROCESS_REGISTRY,
)

_REQUESTS_REFUSED = Counter(
    "tidings_request_refusals",
    "Creates this API process refused at the request edge (429 REQUEST_LIMIT): a "
    "user-triggered class's bound per destination or number prefix had no room. "
    "Classes are the policy's `user_triggered` ones, so the label set is the policy's.",
    ["event_class", "bound"],
    registry=PROCESS_REGISTRY,
)

_CLAIMS = Counter(
    "tidings_claims",
    "Claim statements this process ran (one per batch), by channel.",
    ["channel"],
    registry=PROCESS_REGISTRY,
)
_CLAIM_SECONDS = Histogram(
    "tidings_claim_seconds",
    "Wall time of a claim: the statement, the gate and the batch's moves, one transaction.",
    ["channel"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
    registry=PROCESS_REGISTRY,
)
_CLAIMED = Counter(
    "tidings_claimed_intents",
    "Intents this process claimed, by channel and lane (urgent: of no job; bulk: of a job).",
    ["channel", "lane"],
    registry=PROCESS_REGISTRY,
)

# `_created` series double every family's output and mean nothing to an
# operator; turned off before any metric is made.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]


_LOOKUPS = Counter(
    "tidings_reconciliation_lookups",
    "Status checks made by reconciliation, by provider account and how they "
    "went: id, key, reference or search (a lookup made), ambiguous (a list "
    "search found messages nobody could tell apart), none (no lookup the "
    "provider offers fits: receipts only), failed (the provider did not answer, "
    "or no adapter for the account is configured)",
    ["provider", "how"],
    registry=PROCESS_REGISTRY,
)


class _PrimaryCollector(Collector):
    """Read at scrape time from the process's watch (store/primary.py)."""

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "tidings_database_waiting_for_primary",
            "1 while this process finds no writable primary (a failover or an outage: "
            "its connections broke, or reached a read-only member), else 0.",
            value=1.0 if WATCH.waiting else 0.0,
        )
        yield CounterMetricFamily(
            "tidings_database_primary_waits",
            "Waits for a primary this process has seen end.",
            value=WATCH.waits,
        )
        yield CounterMetricFamily(
            "tidings_database_primary_wait_seconds",
            "Seconds this process spent in the waits for a primary that ended.",
            value=WATCH.waited_s,
        )


PROCESS_REGISTRY.register(_PrimaryCollector())


def record_lookup(provider: str, how: str) -> None:
    _LOOKUPS.labels(provider, how).inc()


def record_provider_call(provider: str, channel: str, outcome: str, seconds: float) -> None:
    """Count one provider send call and its latency (call it after `send`)."""
    _PROVIDER_CALLS.labels(provider, channel, outcome).inc()
    _PROVIDER_CALL_SECONDS.labels(provider, channel).observe(max(0.0, seconds))


def record_claim(channel: str, seconds: float, urgent: int, bulk: int) -> None:
    """Count one claim: its time and what it took from each lane."""
    _CLAIMS.labels(channel).inc()
    _CLAIM_SECONDS.labels(channel).observe(seconds)
    if urgent:
        _CLAIMED.labels(channel, "urgent").inc(urgent)
    if bulk:
        _CLAIMED.labels(channel, "bulk").inc(bulk)


def record_call_withheld(channel: str, reason: str) -> None:
    """Count one claimed send whose call the pre-call read stopped."""
    _CALLS_WITHHELD.labels(channel, reason).inc()


def record_request_refused(event_class: str, bound: str) -> None:
    """Count one create refused at the request edge (`bound`: destination or prefix)."""
    _REQUESTS_REFUSED.labels(event_class, bound).inc()


def record_rate_limit_wait(scope: str, seconds: float) -> None:
    """Count one deferral for a used-up allowance (`scope`: recipient, tenant, ...)."""
    _RATE_LIMIT_WAITS.labels(scope).inc()
    _RATE_LIMIT_WAIT_SECONDS.labels(scope).observe(max(0.0, seconds))


def outcome_of(result: SendResult | None) -> str:
    """The `outcome` label for a send result; None means the adapter raised."""
    return "error" if result is None else type(result).__name__.lower()


def serve_process_metrics(port: int, addr: str = "127.0.0.1") -> None:
    """Expose only the process-local metrics (for a worker with no HTTP API).

    The ledger metrics come from `tidings serve --metrics-port`; serving them here as
    well would make every worker a second copy of the same numbers.
    """
    _start_http_server(port, addr=addr, registry=PROCESS_REGISTRY)
