"""Prometheus metrics: ledger numbers read from rows at scrape time, served
with the process-local counters of `process_metrics.py`.

Why from rows: a counter kept beside the ledger drifts (a crash between
the commit and the increment, a second process, a restart) and then
disagrees with the one place that answers "did it reach anyone?". Every
ledger metric below is therefore a query over intents, attempts,
observations and transitions, run when Prometheus scrapes (invariant 7).
Only provider call latency/outcomes and rate-limit waits are counted in
process, because no row records them.

    server = serve_ledger_metrics(runtime, 9464)     # GET :9464/metrics

Every series carries a `tenant` label: one scrape covers every tenant.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any
from wsgiref.simple_server import WSGIServer

import psycopg
from prometheus_client import CollectorRegistry
from prometheus_client import start_http_server as _start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from tidings.domain.states import IntentState
from tidings.observability.canary_metrics import CANARY_METRICS, canary_families
from tidings.observability.lane_metrics import LANE_METRICS, lane_families
from tidings.observability.process_metrics import PROCESS_METRICS, PROCESS_REGISTRY
from tidings.observability.shared_read import SharedRead
from tidings.observability.transition_rows import allowed_transitions
from tidings.runtime import Runtime
from tidings.store import metrics_reads, provider_pauses, transition_audit
from tidings.store.database import Row

log = logging.getLogger("tidings.metrics")

CHANNELS = ("sms", "email")
# A slow scrape gives up rather than hold a pooled connection: Prometheus
# retries on its next interval, and tidings_ledger_up says what happened.
SCRAPE_TIMEOUT_MS = 5000
# A scrape during a failover must answer, ledger down, with this process's
# own series (tidings_database_waiting_for_primary above all), not wait for
# the pool's connection as long as a request would and time out.
SCRAPE_CONNECTION_WAIT_SECONDS = 1.0
ATTEMPT_BUCKETS = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 10.0)
LATENCY_BUCKETS = (
    1.0,
    5.0,
    15.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    1800.0,
    3600.0,
    21600.0,
    86400.0,
)

# The stable names (tests pin them; dashboards and alert rules use them).
LEDGER_METRICS: tuple[str, ...] = (
    "tidings_ledger_up",
    "tidings_intents",
    "tidings_intents_by_code",
    "tidings_suppressed_total",
    "tidings_due_intents",
    "tidings_oldest_due_intent_age_seconds",
    "tidings_unreconciled_intents",
    "tidings_oldest_unreconciled_age_seconds",
    "tidings_last_successful_reconciliation_timestamp_seconds",
    "tidings_due_status_checks",
    "tidings_poll_lag_seconds",
    "tidings_attempts_per_intent",
    "tidings_accept_to_terminal_seconds",
    "tidings_lease_recoveries_total",
    "tidings_impossible_transitions_total",
    "tidings_quarantined_intents_total",
    "tidings_unknown_intents",
    "tidings_provider_paused_seconds",
    "tidings_provider_tenant_held_seconds",
    *LANE_METRICS,
    *CANARY_METRICS,
)
METRIC_NAMES: tuple[str, ...] = LEDGER_METRICS + PROCESS_METRICS

# --- ledger metrics: computed from rows at scrape time ------------------


class LedgerCollector(Collector):
    """Reads the ledger when collected. Register it in a registry per app.

    One read at a time: a scrape that arrives while another is being read
    gets that read's answer instead of starting its own. A scrape reads
    every finished intent (the histograms), so scrapes that pile up (a
    short interval, several Prometheus replicas, a client that gives up
    and asks again while the server still reads) would otherwise take
    every core from dispatch; one at a time, they cost one read at most.
    """

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._shared = SharedRead(self._read)

    def describe(self) -> Iterable[Metric]:
        return []  # describing would mean querying at registration time

    def collect(self) -> Iterable[Metric]:
        return self._shared()

    def _read(self) -> list[Metric]:
        now = self.runtime.clock.now()
        up = GaugeMetricFamily(
            "tidings_ledger_up", "1 when the last scrape could read the ledger rows, else 0."
        )
        try:
            with self.runtime.db.transaction(wait=SCRAPE_CONNECTION_WAIT_SECONDS) as conn:
                metrics_reads.limit_statement_time(conn, SCRAPE_TIMEOUT_MS)
                families = list(_ledger_families(conn, now))
        except psycopg.Error as exc:
            log.warning("metrics: ledger unreadable: %s", type(exc).__name__)
            up.add_metric([], 0.0)
            return [up]
        up.add_metric([], 1.0)
        return [up, *families]


def _ledger_families(conn: psycopg.Connection[Any], now: datetime) -> Iterator[Metric]:
    by_state = metrics_reads.intents_by_state(conn)
    tenants = sorted({r["tenant_id"] for r in by_state})
    yield _intents(by_state, tenants)
    yield from _codes(metrics_reads.intents_by_code(conn))
    yield from _due(metrics_reads.due(conn, now), tenants, now)
    yield from lane_families(conn, now, tenants)
    yield from _unreconciled(metrics_reads.unreconciled(conn), now)
    yield _last_reconciliation(metrics_reads.last_reconciliation(conn))
    yield from _poll_lag(metrics_reads.poll_lag(conn, now), tenants, now)
    yield _histogram(
        "tidings_attempts_per_intent",
        "Attempts each terminal intent took (0: decided without a send).",
        metrics_reads.attempts_histogram(conn, ATTEMPT_BUCKETS),
    )
    yield _histogram(
        "tidings_accept_to_terminal_seconds",
        "From provider acceptance to terminal evidence, per terminal intent.",
        metrics_reads.accept_to_terminal_histogram(conn, LATENCY_BUCKETS),
    )
    allowed = allowed_transitions()
    transition_audit.fold(conn, allowed)
    yield from _audit(metrics_reads.transition_audit(conn, allowed), tenants)
    yield _quarantined(metrics_reads.quarantined(conn))
    yield _unknown(metrics_reads.unknown(conn))
    yield _paused(provider_pauses.active(conn, now), now)
    yield _held(provider_pauses.held(conn, now), now)
    yield from canary_families(conn)


def _unknown(rows: list[Row]) -> Metric:
    family = GaugeMetricFamily(
        "tidings_unknown_intents",
        "Intents whose outcome stayed unknown (a call started, reconciliation gave up), "
        "by the provider account of their last attempt, event class and channel.",
        labels=["tenant", "provider", "event_class", "channel"],
    )
    for r in rows:
        family.add_metric([r["tenant_id"], r["provider"], r["event_class"], r["channel"]], r["n"])
    return family


def _intents(rows: list[Row], tenants: list[str]) -> Metric:
    family = GaugeMetricFamily(
        "tidings_intents", "Intents by current state.", labels=["tenant", "state"]
    )
    # Every state appears for every tenant, so a rate or a ratio never sees a gap.
    counts = {(r["tenant_id"], r["state"]): r["n"] for r in rows}
    for tenant in tenants:
        for state in IntentState:
            family.add_metric([tenant, state.value], counts.get((tenant, state.value), 0))
    return family


def _codes(rows: list[Row]) -> Iterator[Metric]:
    by_code = GaugeMetricFamily(
        "tidings_intents_by_code",
        "Intents by the policy or outcome code of their latest decision.",
        labels=["tenant", "code"],
    )
    suppressed = CounterMetricFamily(
        "tidings_suppressed",
        "Intents the policy suppressed, by code (counted from rows).",
        labels=["tenant", "code"],
    )
    for row in rows:
        by_code.add_metric([row["tenant_id"], row["code"]], row["n"])
        if row["suppressed"]:
            suppressed.add_metric([row["tenant_id"], row["code"]], row["suppressed"])
    yield by_code
    yield suppressed


def _due(rows: list[Row], tenants: list[str], now: datetime) -> Iterator[Metric]:
    count = GaugeMetricFamily(
        "tidings_due_intents", "Intents due now and not claimed.", labels=["tenant", "channel"]
    )
    age = GaugeMetricFamily(
        "tidings_oldest_due_intent_age_seconds",
        "How long the oldest due, unclaimed intent has been due (0: none).",
        labels=["tenant", "channel"],
    )
    found = {(r["tenant_id"], r["channel"]): r for r in rows}
    for key in sorted(set(found) | {(t, c) for t in tenants for c in CHANNELS}):
        row = found.get(key)
        count.add_metric(list(key), row["n"] if row else 0)
        age.add_metric(list(key), _age(now, row["oldest"]) if row else 0.0)
    yield count
    yield age


def _unreconciled(rows: list[Row], now: datetime) -> Iterator[Metric]:
    labels = ["tenant", "event_class", "channel"]
    count = GaugeMetricFamily(
        "tidings_unreconciled_intents",
        "Intents sent or being sent with no terminal evidence yet.",
        labels=labels,
    )
    age = GaugeMetricFamily(
        "tidings_oldest_unreconciled_age_seconds",
        "Age (since creation) of the oldest intent without terminal evidence.",
        labels=labels,
    )
    for row in rows:
        values = [row["tenant_id"], row["event_class"], row["channel"]]
        count.add_metric(values, row["n"])
        age.add_metric(values, _age(now, row["oldest"]))
    yield count
    yield age


def _last_reconciliation(rows: list[Row]) -> Metric:
    family = GaugeMetricFamily(
        "tidings_last_successful_reconciliation_timestamp_seconds",
        "Unix time of the newest polled, looked-up or webhook observation.",
        labels=["tenant", "channel"],
    )
    for row in rows:
        family.add_metric([row["tenant_id"], row["channel"]], row["at"].timestamp())
    return family


def _poll_lag(rows: list[Row], tenants: list[str], now: datetime) -> Iterator[Metric]:
    count = GaugeMetricFamily(
        "tidings_due_status_checks", "Status checks due and not done.", labels=["tenant"]
    )
    lag = GaugeMetricFamily(
        "tidings_poll_lag_seconds",
        "How far the oldest due status check is behind its time (0: none).",
        labels=["tenant"],
    )
    found = {r["tenant_id"]: r for r in rows}
    for tenant in sorted(set(found) | set(tenants)):
        row = found.get(tenant)
        count.add_metric([tenant], row["n"] if row else 0)
        lag.add_metric([tenant], _age(now, row["oldest"]) if row else 0.0)
    yield count
    yield lag


def _histogram(name: str, documentation: str, rows: list[Row]) -> Metric:
    family = HistogramMetricFamily(name, documentation, labels=["tenant", "channel"])
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((row["tenant_id"], row["channel"]), []).append(row)
    for key, group in sorted(groups.items()):
        buckets: list[tuple[str, float]] = [(repr(float(r["le"])), r["n"]) for r in group]
        buckets.append(("+Inf", group[0]["count"]))
        family.add_metric(list(key), buckets, sum_value=float(group[0]["sum"] or 0.0))
    return family


def _audit(rows: list[Row], tenants: list[str]) -> Iterator[Metric]:
    recoveries = CounterMetricFamily(
        "tidings_lease_recoveries",
        "Sends whose worker lease expired and were reconciled instead (from transitions).",
        labels=["tenant"],
    )
    impossible = CounterMetricFamily(
        "tidings_impossible_transitions",
        "Audited transitions the transition table does not allow. Must stay 0.",
        labels=["tenant"],
    )
    found = {r["tenant_id"]: r for r in rows}
    for tenant in sorted(set(found) | set(tenants)):
        row: Mapping[str, Any] = found.get(tenant, {})
        recoveries.add_metric([tenant], row.get("lease_recoveries", 0))
        impossible.add_metric([tenant], row.get("impossible", 0))
    yield recoveries
    yield impossible


def _paused(rows: list[Row], now: datetime) -> Metric:
    family = GaugeMetricFamily(
        "tidings_provider_paused_seconds",
        "Seconds until a provider account that said back off (429, a 5xx or timeout storm) "
        "is claimed for again, by the tenant whose traffic drew the answer that set it; "
        "no sample while it is not paused.",
        labels=["provider", "code", "caused_by"],
    )
    for r in rows:
        family.add_metric(
            [r["account"], r["code"], r["caused_by"]], max(0.0, _age(r["paused_until"], now))
        )
    return family


def _held(rows: list[Row], now: datetime) -> Metric:
    family = GaugeMetricFamily(
        "tidings_provider_tenant_held_seconds",
        "Seconds until a tenant whose own traffic drew a provider account's back-off "
        "answers is claimed for on that account again (its own exponential backoff; "
        "the account's shared pause is capped); no sample while it is not held.",
        labels=["tenant", "provider", "code"],
    )
    for r in rows:
        family.add_metric(
            [r["tenant_id"], r["account"], r["code"]], max(0.0, _age(r["held_until"], now))
        )
    return family


def _quarantined(rows: list[Row]) -> Metric:
    family = CounterMetricFamily(
        "tidings_quarantined_intents",
        "Intents failed alone because a worker could not decode (UNDECODABLE) or "
        "render (UNRENDERABLE) them; their batches went on (dispatch/quarantine.py).",
        labels=["tenant", "code"],
    )
    for row in rows:
        family.add_metric([row["tenant_id"], row["code"]], row["n"])
    return family


def _age(now: datetime, then: datetime | None) -> float:
    return 0.0 if then is None else max(0.0, (now - then).total_seconds())


# --- exposition -----------------------------------------------------------


class _ProcessLocal(Collector):
    def collect(self) -> Iterable[Metric]:
        return PROCESS_REGISTRY.collect()

    def describe(self) -> Iterable[Metric]:
        return []


def ledger_registry(runtime: Runtime) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LedgerCollector(runtime))
    registry.register(_ProcessLocal())
    return registry


def serve_ledger_metrics(runtime: Runtime, port: int, addr: str = "127.0.0.1") -> WSGIServer:
    """`GET /metrics` (ledger plus this process) on its own port, for `tidings serve`.

    Not on the API port: the series name every tenant and their free-text
    event classes, and any tenant's key reaches the API. A listener of its
    own lets the operator keep it on the internal network where Prometheus
    scrapes. Returns the server so a caller can `shutdown()` it.
    """
    server, _ = _start_http_server(port, addr=addr, registry=ledger_registry(runtime))
    return server
