"""Reading alerts and metrics in a test, without a worker's round or a port."""

from __future__ import annotations

from datetime import datetime

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from tidings.observability.alerts import every_condition
from tidings.observability.alerts.config import AlertConfig
from tidings.observability.alerts.rules import Alert
from tidings.observability.metrics import ledger_registry
from tidings.runtime import Runtime
from tidings.store.database import Database


def evaluate_alerts(db: Database, now: datetime, config: AlertConfig | None = None) -> list[Alert]:
    """Every condition that holds now, across all tenants (nothing is stored)."""
    with db.transaction() as conn:
        return every_condition(conn, now, config or AlertConfig.from_env())


def render_metrics(runtime: Runtime) -> tuple[bytes, str]:
    """The Prometheus text `tidings serve --metrics-port` serves: ledger rows plus this process."""
    return generate_latest(ledger_registry(runtime)), CONTENT_TYPE_LATEST
